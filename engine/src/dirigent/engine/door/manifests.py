"""The manifests facet: apply, plan and delete any of the four kinds.

``apply`` validates and stores one manifest in one transaction and answers every problem at
once; a dry run does the same work and rolls it back. ``delete`` follows the resource's
deletion policy: Retain deactivates and keeps history, Delete cancels runs in flight first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from dirigent.engine.door.applying import Applied, apply_manifest
from dirigent.engine.door.parts import Parts
from dirigent.engine.door.runs import Runs
from dirigent.engine.rules import planning
from dirigent.engine.rules.planning import PlanChanges
from dirigent.engine.shapes.manifests.loading import Manifest
from dirigent.engine.shapes.manifests.pipeline import Pipeline
from dirigent.engine.shapes.problems import ProblemsError, problem
from dirigent.engine.store.pool import Connection
from dirigent.engine.store.queries import reads
from dirigent.engine.store.transactions import connections as connections_store
from dirigent.engine.store.transactions import definitions
from dirigent.engine.store.transactions import schedules as schedules_store
from dirigent.engine.store.transactions import webhooks as webhooks_store

DeletionPolicy = Literal["Retain", "Delete"]


@dataclass(frozen=True)
class Deleted:
    kind: str
    name: str
    found: bool
    history_deleted: bool = False
    runs_cancelled: int = 0


class _Rollback(Exception):
    """Raised inside a dry-run transaction so that nothing it wrote is kept."""

    def __init__(self, result: Applied) -> None:
        self.result = result


class Manifests:
    def __init__(self, parts: Parts, runs: Runs) -> None:
        self._p = parts
        self._runs = runs

    async def apply(
        self,
        manifest: Manifest,
        namespace: str,
        *,
        secret_values: Mapping[str, str] | None = None,
        provenance: dict[str, Any] | None = None,
        owner_uid: str | None = None,
        dry_run: bool = False,
    ) -> Applied:
        """Validate and store one manifest; raises ProblemsError with every problem at once.

        ``dry_run`` does the same work in a transaction that is rolled back: the answer says
        what would happen (created, updated, unchanged) and the digest it would have.
        """

        async def write(conn: Connection) -> Applied:
            result = await apply_manifest(
                conn,
                manifest,
                namespace=namespace,
                catalog=self._p.catalog,
                sealer=self._p.sealer,
                secret_values=secret_values,
                enabled_unsafe=self._p.enabled_unsafe,
                provenance=provenance,
                owner_uid=owner_uid,
                versions=self._p.versions,
                grace=self._p.settings.scheduler_misfire_grace,
            )
            if dry_run:
                raise _Rollback(result)
            return result

        try:
            return await self._p.tx(write)
        except _Rollback as planned:
            return planned.result

    async def plan(self, manifest: Manifest, namespace: str) -> PlanChanges:
        """What applying ``manifest`` would change against the stored current version."""
        if not isinstance(manifest, Pipeline):
            return PlanChanges()
        name = manifest.metadata.name
        record = await self._p.read(lambda c: definitions.get_pipeline(c, namespace, name))
        return planning.changes(
            record.document if record else None, manifest, record.digest if record else None
        )

    async def delete(
        self, kind: str, namespace: str, name: str, policy: DeletionPolicy = "Retain"
    ) -> Deleted:
        """Retain deactivates and keeps history; Delete cancels runs in flight, then deletes."""
        if kind == "Connection":
            found = await self._p.tx(
                lambda c: connections_store.delete_connection(c, namespace, name)
            )
            return Deleted(kind, name, found)
        if kind in ("Schedule", "Webhook"):
            remove = (
                schedules_store.delete_schedule
                if kind == "Schedule"
                else webhooks_store.delete_webhook
            )
            return Deleted(kind, name, await self._p.tx(lambda c: remove(c, namespace, name)))
        if kind != "Pipeline":
            raise ProblemsError(
                [problem("delete.kind.unsupported", f"{kind} is not stored by this engine", "kind")]
            )
        if policy == "Retain":
            found = await self._p.tx(lambda c: definitions.set_active(c, namespace, name, False))
            return Deleted(kind, name, found)
        cancelled = 0
        in_flight = await self._p.read(lambda c: reads.runs_in_flight(c, namespace, name))
        for run in in_flight:
            await self._runs.cancel(namespace, run, reason=f"pipeline {name} deleted")
            cancelled += 1
        found = await self._p.tx(lambda c: definitions.delete_pipeline(c, namespace, name))
        return Deleted(kind, name, found, history_deleted=found, runs_cancelled=cancelled)
