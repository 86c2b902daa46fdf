"""Apply: the one path by which a manifest becomes engine state, whatever door it came in.

The operator (kubectl), the REST API, ``dirigent dev`` and ``dirigent run --local`` all call
``apply_manifest``. It validates offline (the document alone) and against the catalog (the
installed blocks, the namespace's connections) and reports every problem at once; only a
manifest with none is written.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, assert_never

from pydantic import ValidationError

from dirigent.engine.infrastructure.crypto import SecretSealer
from dirigent.engine.infrastructure.plugins import Catalog
from dirigent.engine.rules.firing import DEFAULT_GRACE
from dirigent.engine.rules.templates import check_alerting
from dirigent.engine.rules.validation.catalog import check_against_catalog
from dirigent.engine.rules.validation.pipelines import check_pipeline
from dirigent.engine.shapes.manifests.connection import Connection
from dirigent.engine.shapes.manifests.loading import Manifest
from dirigent.engine.shapes.manifests.pipeline import Pipeline
from dirigent.engine.shapes.manifests.schedule import Schedule
from dirigent.engine.shapes.manifests.webhook import Webhook
from dirigent.engine.shapes.problems import ProblemsError, problem
from dirigent.engine.store import pool
from dirigent.engine.store.transactions import connections as connections_store
from dirigent.engine.store.transactions import definitions
from dirigent.engine.store.transactions import schedules as schedules_store
from dirigent.engine.store.transactions import webhooks as webhooks_store
from dirigent.engine.store.transactions.definitions import ApplyAction
from dirigent.engine.store.transactions.versions import VersionCache


@dataclass(frozen=True)
class Applied:
    kind: str
    name: str
    action: ApplyAction
    version: int | None = None
    digest: str | None = None


async def apply_manifest(
    conn: pool.Connection,
    manifest: Manifest,
    *,
    namespace: str,
    catalog: Catalog,
    sealer: SecretSealer | None = None,
    secret_values: Mapping[str, str] | None = None,
    enabled_unsafe: Collection[str] | None = None,
    provenance: dict[str, Any] | None = None,
    owner_uid: str | None = None,
    versions: VersionCache | None = None,
    now: dt.datetime | None = None,
    grace: dt.timedelta = DEFAULT_GRACE,
) -> Applied:
    """Validate and store one manifest. Call inside a transaction; raises ProblemsError."""
    if isinstance(manifest, Pipeline):
        return await _apply_pipeline(
            conn, manifest, namespace, catalog, enabled_unsafe, provenance, owner_uid
        )
    if isinstance(manifest, Connection):
        return await _apply_connection(
            conn, manifest, namespace, catalog, sealer, secret_values, owner_uid
        )
    if isinstance(manifest, Schedule):
        action = await schedules_store.apply_schedule(
            conn,
            manifest,
            namespace=namespace,
            now=now or dt.datetime.now(dt.UTC),
            grace=grace,
            versions=versions or VersionCache(),
            owner_uid=owner_uid,
        )
        return Applied("Schedule", manifest.metadata.name, action)
    if isinstance(manifest, Webhook):
        action = await webhooks_store.apply_webhook(
            conn,
            manifest,
            namespace=namespace,
            versions=versions or VersionCache(),
            secret_values=secret_values or {},
            sealer=sealer,
            owner_uid=owner_uid,
        )
        return Applied("Webhook", manifest.metadata.name, action)
    assert_never(manifest)


async def _apply_pipeline(
    conn: pool.Connection,
    manifest: Pipeline,
    namespace: str,
    catalog: Catalog,
    enabled_unsafe: Collection[str] | None,
    provenance: dict[str, Any] | None,
    owner_uid: str | None,
) -> Applied:
    """Offline checks, then against the catalog and the namespace's connections, then store."""
    problems = check_pipeline(manifest)
    names = await connections_store.connection_kinds(conn, namespace)
    problems += check_against_catalog(
        manifest,
        catalog,
        connections=names,
        enabled_unsafe=enabled_unsafe,
        pipelines=await definitions.active_among(conn, namespace, manifest.required_pipelines),
        storage_schemes=catalog.storage_schemes,
    )
    problems += check_alerting(manifest, catalog, connections=names)
    if problems:
        raise ProblemsError(problems)
    result = await definitions.apply_pipeline(
        conn, manifest, namespace=namespace, provenance=provenance, owner_uid=owner_uid
    )
    return Applied("Pipeline", manifest.metadata.name, result.action, result.version, result.digest)


async def _apply_connection(
    conn: pool.Connection,
    manifest: Connection,
    namespace: str,
    catalog: Catalog,
    sealer: SecretSealer | None,
    secret_values: Mapping[str, str] | None,
    owner_uid: str | None,
) -> Applied:
    """A known connection kind with every secret field given; the secrets are sealed."""
    if manifest.spec.type not in catalog.connection_kinds and catalog.connection_kinds:
        raise ProblemsError(
            [
                problem(
                    "connection.type.unknown",
                    f"connection kind '{manifest.spec.type}' is not installed",
                    "spec",
                    "type",
                )
            ]
        )
    values = dict(secret_values or {})
    missing = sorted(set(manifest.spec.secrets) - set(values))
    if missing:
        raise ProblemsError(
            [
                problem(
                    "connection.secret.missing",
                    f"no value was given for secret field '{m}'",
                    "spec",
                    "secrets",
                    m,
                )
                for m in missing
            ]
        )
    _check_fits(manifest, catalog, values)
    action = await connections_store.apply_connection(
        conn,
        manifest,
        namespace=namespace,
        secret_values=values,
        sealer=sealer,
        owner_uid=owner_uid,
    )
    return Applied("Connection", manifest.metadata.name, action)


def _check_fits(manifest: Connection, catalog: Catalog, secrets: Mapping[str, str]) -> None:
    """Refuse at apply a Connection its kind's model does not accept (it failed every step
    that opened it, at run time, with the secrets quoted in the error), located at the
    field and never quoting a value."""
    kind = catalog.connection_kinds.get(manifest.spec.type)
    if kind is None:
        return
    try:
        type(kind).config_model.model_validate({**manifest.spec.settings, **secrets})
    except ValidationError as err:
        found = []
        for e in err.errors(include_url=False, include_input=False, include_context=False):
            field = str(e["loc"][0]) if e["loc"] else ""
            section = "secrets" if field in manifest.spec.secrets else "settings"
            where = [str(p) for p in e["loc"]]
            found.append(
                problem(
                    "connection.settings.invalid",
                    f"{manifest.spec.type} connection: {'.'.join(where) or 'settings'}: {e['msg']}",
                    "spec",
                    section,
                    *where,
                )
            )
        raise ProblemsError(found) from None
