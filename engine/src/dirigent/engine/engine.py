"""The engine's one door: every process reaches the engine through ``Engine``.

The operator, the REST API, the scheduler, ``dirigent dev``, ``dirigent run --local``, the
benches and the tests all hold an ``Engine`` and call its verbs — apply and delete a
manifest, start, cancel and retry runs, read views, subscribe to transitions, run a worker.
It owns the pool, the catalog, the version cache, the secret sealer, the artifact storage
and every transaction; a caller never sees a connection. Built once per process from
``EngineSettings`` (``Engine.open``), so two engines in one process never share state.

Errors a person can act on are ``ProblemsError`` (a list of located problems with dotted
codes); ``EngineUnavailable`` means the database cannot be used at all (unreachable, or not
migrated), with one line saying what to do.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib.metadata
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

import structlog
from prometheus_client import CollectorRegistry

from dirigent.engine import planning
from dirigent.engine.applying import Applied, apply_manifest
from dirigent.engine.health import ConnectionHealth, check_opened
from dirigent.engine.intake import HookAnswer, WebhookIntake
from dirigent.engine.manifests.export import to_yaml
from dirigent.engine.manifests.loading import Manifest, parse_manifest
from dirigent.engine.manifests.pipeline import Pipeline
from dirigent.engine.planning import PlanChanges
from dirigent.engine.plugins import BlockEntry, Catalog, discover
from dirigent.engine.problems import EngineUnavailable, Problem, ProblemsError, problem
from dirigent.engine.runtime import cancelling
from dirigent.engine.runtime.process import worker_config
from dirigent.engine.runtime.scheduling import Scheduler, SchedulerConfig
from dirigent.engine.runtime.worker import Worker
from dirigent.engine.settings import EngineSettings
from dirigent.engine.storage import SERVED_SCHEMES, FileStorage
from dirigent.engine.store import (
    api_reads,
    definitions,
    events,
    reads,
    retrying,
    runs,
)
from dirigent.engine.store import backfill as backfill_store
from dirigent.engine.store import connections as connections_store
from dirigent.engine.store import schedules as schedules_store
from dirigent.engine.store import webhooks as webhooks_store
from dirigent.engine.store.crypto import SecretSealer
from dirigent.engine.store.database import current_revision, require_head
from dirigent.engine.store.definitions import PipelineRecord
from dirigent.engine.store.pool import DATABASE_ERRORS, Connection, Database, asyncpg_dsn
from dirigent.engine.store.reads import RunFilter
from dirigent.engine.store.retrying import ManualRetry
from dirigent.engine.store.runs import RunCreated, RunRequest
from dirigent.engine.store.versions import VersionCache
from dirigent.engine.trigger_metrics import RunMetrics, SchedulerMetrics, WebhookMetrics
from dirigent.engine.validation.catalog import check_against_catalog
from dirigent.engine.validation.pipelines import check_pipeline
from dirigent.engine.views import (
    ArtifactView,
    AttemptView,
    BackfillRequest,
    BackfillResult,
    BlockView,
    ConnectionView,
    DeliveryView,
    EngineEvent,
    FailureView,
    FiringView,
    ItemView,
    LogView,
    NotificationView,
    Page,
    PipelineSummary,
    PipelineVersionView,
    RunDetail,
    RunSummary,
    ScheduleView,
    SystemInfo,
    WebhookView,
    WorkerView,
    decode_cursor,
    decode_key,
    encode_cursor,
)

__all__ = [
    "Applied",
    "Deleted",
    "Engine",
    "EngineUnavailable",
    "ManualRetry",
    "RunCreated",
    "RunFilter",
    "RunRequest",
]

log = structlog.get_logger("dirigent.engine")
T = TypeVar("T")
DeletionPolicy = Literal["Retain", "Delete"]
MAX_PAGE = 1000
_UNANSWERED: tuple[type[Exception], ...] = (TimeoutError, *DATABASE_ERRORS)


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


class Engine:
    """One per process. Build with ``async with Engine.open(settings) as engine``."""

    def __init__(
        self,
        settings: EngineSettings,
        database: Database,
        catalog: Catalog,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.settings = settings
        # The process's registry (it serves it on its metrics port): runs started, and the
        # scheduler's and the intake's collectors, land beside the process's own.
        self.registry = registry or CollectorRegistry()
        self.run_metrics = RunMetrics(self.registry)
        self._scheduler_metrics: SchedulerMetrics | None = None
        self.url = database.url
        self.direct_url = database.direct_url  # LISTEN and advisory locks: never a pooler
        self.catalog = catalog
        self.storage = FileStorage(settings.artifact_root)
        self.sealer = (
            SecretSealer.from_settings(settings) if settings.secret_key is not None else None
        )
        self.enabled_unsafe = frozenset(settings.enabled_unsafe_blocks)
        self._db = database
        self.versions = VersionCache()
        self._events = _Broadcast()
        self._listening = False
        self._intake: WebhookIntake | None = None

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls,
        settings: EngineSettings,
        *,
        url: str | None = None,
        catalog: Catalog | None = None,
        pool_size: int | None = None,
        registry: CollectorRegistry | None = None,
    ) -> AsyncIterator[Engine]:
        """Connect, check the schema is current, and close everything on the way out.

        ``registry``: where the scheduler's and the webhook intake's metrics go (the process's
        served registry); without one they are kept private to this engine.
        """
        url = url or settings.require_database_url()
        direct = settings.database_direct_url if url == settings.database_url else None
        await require_head(direct or url)
        # The connection budget is its own setting: blocks hold no connection while they
        # run, so a worker at concurrency 64 shares a few short transactions between them.
        database = await Database.connect(
            url, max_size=pool_size or settings.database_pool_size, direct_url=direct
        )
        try:
            yield cls(settings, database, catalog or discover(), registry)
        finally:
            await database.close()

    async def _tx(self, fn: Callable[[Connection], Awaitable[T]]) -> T:
        return await self._db.transaction(fn)

    async def _read(self, fn: Callable[[Connection], Awaitable[T]]) -> T:
        return await self._db.read(fn)

    # --- manifests -------------------------------------------------------------------

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
                catalog=self.catalog,
                sealer=self.sealer,
                secret_values=secret_values,
                enabled_unsafe=self.enabled_unsafe,
                provenance=provenance,
                owner_uid=owner_uid,
                versions=self.versions,
                grace=self.settings.scheduler_misfire_grace,
            )
            if dry_run:
                raise _Rollback(result)
            return result

        try:
            return await self._tx(write)
        except _Rollback as planned:
            return planned.result

    async def delete(
        self, kind: str, namespace: str, name: str, policy: DeletionPolicy = "Retain"
    ) -> Deleted:
        """Retain deactivates and keeps history; Delete cancels runs in flight, then deletes."""
        if kind == "Connection":
            found = await self._tx(
                lambda c: connections_store.delete_connection(c, namespace, name)
            )
            return Deleted(kind, name, found)
        if kind in ("Schedule", "Webhook"):
            return Deleted(kind, name, await self._delete_trigger(kind, namespace, name))
        if kind != "Pipeline":
            raise ProblemsError(
                [problem("delete.kind.unsupported", f"{kind} is not stored by this engine", "kind")]
            )
        if policy == "Retain":
            found = await self._tx(lambda c: definitions.set_active(c, namespace, name, False))
            return Deleted(kind, name, found)
        cancelled = 0
        for run in await self._in_flight(namespace, name):
            await self.cancel_run(namespace, run, reason=f"pipeline {name} deleted")
            cancelled += 1
        found = await self._tx(lambda c: definitions.delete_pipeline(c, namespace, name))
        return Deleted(kind, name, found, history_deleted=found, runs_cancelled=cancelled)

    async def _in_flight(self, namespace: str, pipeline: str) -> list[int]:
        return await self._read(lambda c: reads.runs_in_flight(c, namespace, pipeline))

    # --- runs ------------------------------------------------------------------------

    async def start_run(self, request: RunRequest) -> RunCreated:
        """Create a run of the pipeline's current version (params checked, grid drawn)."""
        created = await self._tx(lambda c: self._create_run(c, request))
        self._count_started(request, created)
        return created

    async def start_runs(self, requests: list[RunRequest]) -> list[RunCreated]:
        """Create several runs in one transaction: workers see all of them at once, or none."""

        async def create_all(conn: Connection) -> list[RunCreated]:
            return await runs.create_runs(
                conn,
                requests,
                versions=self.versions,
                catalog=self.catalog,
                enabled_unsafe=self.enabled_unsafe,
            )

        made = await self._tx(create_all)
        for request, created in zip(requests, made, strict=True):
            self._count_started(request, created)
        return made

    async def cancel_run(self, namespace: str, run_id: int, *, reason: str) -> int:
        """Cancel in one transaction, then tell remote work; returns how many remotes were told."""
        await self._require_run(namespace, run_id)
        return await cancelling.cancel_run(
            self._db.pool,
            run_id,
            reason=reason,
            catalog=self.catalog,
            storage=self.storage,
            versions=self.versions,
            sealer=self.sealer,
        )

    async def retry(
        self, namespace: str, run_id: int, step: str, *, idempotency_key: str
    ) -> ManualRetry:
        """One more try of a failed step, or of exactly its failed items."""
        await self._require_run(namespace, run_id)
        return await self._tx(
            lambda c: retrying.retry_step(
                c, run_id, step, idempotency_key=idempotency_key, versions=self.versions
            )
        )

    async def _require_run(self, namespace: str, run_id: int) -> None:
        found = await self._read(lambda c: reads.run_namespace(c, run_id))
        if found != namespace:
            raise ProblemsError(
                [problem("run.not_found", f"run {run_id} does not exist in {namespace}", "run")]
            )

    # --- reads -----------------------------------------------------------------------

    async def pipelines(
        self, namespace: str, *, cursor: str | None = None, limit: int = 100
    ) -> Page[PipelineSummary]:
        after = decode_key(cursor, str)
        rows = await self._read(
            lambda c: reads.pipeline_summaries(c, namespace, after=after, limit=_limit(limit))
        )
        return _page(rows, limit, lambda r: (r.name,))

    async def pipeline(self, namespace: str, name: str) -> PipelineRecord | None:
        return await self._read(lambda c: definitions.get_pipeline(c, namespace, name))

    async def runs(
        self,
        namespace: str,
        where: RunFilter | None = None,
        *,
        cursor: str | None = None,
        limit: int = 100,
    ) -> Page[RunSummary]:
        before = decode_key(cursor, int)
        rows = await self._read(
            lambda c: reads.run_summaries(
                c, namespace, where or RunFilter(), before_id=before, limit=_limit(limit)
            )
        )
        return _page(rows, limit, lambda r: (r.id,))

    async def run(self, namespace: str, run_id: int) -> RunDetail | None:
        return await self._read(lambda c: reads.run_detail(c, namespace, run_id))

    async def items(
        self, namespace: str, run_id: int, step: str, *, cursor: str | None = None, limit: int = 100
    ) -> Page[ItemView]:
        await self._require_run(namespace, run_id)
        after = decode_key(cursor, int)
        rows = await self._read(
            lambda c: reads.items_page(c, run_id, step, after=after, limit=_limit(limit))
        )
        return _page(rows, limit, lambda r: (r.index,))

    async def attempts(
        self,
        namespace: str,
        run_id: int,
        step: str | None = None,
        *,
        cursor: str | None = None,
        limit: int = 100,
    ) -> Page[AttemptView]:
        await self._require_run(namespace, run_id)
        after = decode_key(cursor, int)
        rows = await self._read(
            lambda c: reads.attempts_page(c, run_id, step, after=after, limit=_limit(limit))
        )
        return _page(rows, limit, lambda r: (r.id,))

    async def logs(
        self, namespace: str, run_id: int, *, cursor: str | None = None, limit: int = 500
    ) -> Page[LogView]:
        """Log lines after the cursor. ``next`` is always set: following a log never ends."""
        await self._require_run(namespace, run_id)
        after = decode_key(cursor, int)
        rows = await self._read(
            lambda c: reads.logs_page(c, run_id, after=after, limit=_limit(limit))
        )
        last = rows[-1].id if rows else after
        return Page(items=rows, next=encode_cursor(last) if last is not None else cursor)

    async def failures(self, namespace: str, run_id: int) -> list[FailureView]:
        await self._require_run(namespace, run_id)
        return await self._read(lambda c: reads.failures(c, run_id))

    # --- events ----------------------------------------------------------------------

    async def subscribe(
        self,
        *,
        namespace: str | None = None,
        run_id: int | None = None,
        cursor: str | None = None,
        poll: float = 0.5,
    ) -> AsyncIterator[EngineEvent]:
        """Run, step and attempt transitions after ``cursor`` (or from now), forever.

        Resumable: pass the ``cursor`` of the last event handled, and nothing is skipped or
        repeated. Woken by NOTIFY for run and step transitions; ``poll`` bounds how late an
        attempt transition (which sends no NOTIFY) can be seen.
        """
        # "Now" is read before the LISTEN connection opens, not after: what commits while it
        # opens is news, and the first read below finds it.
        if cursor is not None:
            xid, last = decode_cursor(cursor, 2)
            position = (int(xid), int(last))
        else:
            position = await self._read(events.latest_position)
        await self._listen()
        while True:
            woken = self._events.waiter()
            batch = await self._events_after(position, namespace, run_id)
            for event in batch:
                yield event
            if batch:
                last_key = decode_cursor(batch[-1].cursor, 2)
                position = (int(last_key[0]), int(last_key[1]))
                if len(batch) == MAX_PAGE:
                    continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), poll)

    async def _events_after(
        self, position: tuple[int, int], namespace: str | None, run_id: int | None
    ) -> list[EngineEvent]:
        return await self._read(
            lambda c: events.events_after(
                c, after=position, namespace=namespace, run_id=run_id, limit=MAX_PAGE
            )
        )

    async def _listen(self) -> None:
        if not self._listening:
            self._listening = True
            await self._db.listen(events.EVENTS_CHANNEL, self._events.notify)

    # --- workers ---------------------------------------------------------------------

    def worker(self, **overrides: Any) -> Worker:
        """A worker on this engine's pool and catalog; ``overrides`` adjust its config."""
        config = dataclasses.replace(worker_config(self.settings), **overrides)
        return Worker(
            self._db.pool, asyncpg_dsn(self.direct_url), self.catalog, self.storage, config
        )

    # --- operator status -------------------------------------------------------------

    async def pipeline_summary(self, namespace: str, name: str) -> PipelineSummary | None:
        """One pipeline's summary (runs in flight, newest run): what its status shows."""
        rows = await self._read(
            lambda c: reads.pipeline_summaries(c, namespace, after=None, limit=1, only=name)
        )
        return rows[0] if rows else None

    # --- triggers and alerting --------------------------------------------------------

    async def _create_run(self, conn: Connection, request: RunRequest) -> RunCreated:
        return await runs.create_run(
            conn,
            request,
            versions=self.versions,
            catalog=self.catalog,
            enabled_unsafe=self.enabled_unsafe,
        )

    def _count_started(self, request: RunRequest, created: RunCreated) -> None:
        if created.created:  # an idempotency key that found its run started nothing
            self.run_metrics.started(request.namespace, request.pipeline, request.triggered_by_kind)

    async def _delete_trigger(self, kind: str, namespace: str, name: str) -> bool:
        store = (
            schedules_store.delete_schedule if kind == "Schedule" else webhooks_store.delete_webhook
        )
        return await self._tx(lambda c: store(c, namespace, name))

    def scheduler(self, **overrides: Any) -> Scheduler:
        """The scheduler on this engine's pool; it leads only while it holds the lock."""
        config = SchedulerConfig(
            tick=self.settings.scheduler_tick, grace=self.settings.scheduler_misfire_grace
        )
        config = dataclasses.replace(config, **overrides)
        if self._scheduler_metrics is None:  # one set of collectors per registry
            self._scheduler_metrics = SchedulerMetrics(self.registry)
        return Scheduler(
            self._db.pool,
            asyncpg_dsn(self.direct_url),
            self._create_run,
            config,
            metrics=self._scheduler_metrics,
            runs=self.run_metrics,
        )

    async def receive_webhook(
        self, token: str, *, headers: Mapping[str, str], body: AsyncIterator[bytes]
    ) -> HookAnswer:
        """One delivery to ``/hooks/{token}``: 202 with the run id, or a refusal (recorded)."""
        if self._intake is None:
            self._intake = WebhookIntake(
                self._db,
                self.sealer,
                self._create_run,
                max_body=self.settings.webhook_max_body,
                metrics=WebhookMetrics(self.registry),
                runs=self.run_metrics,
            )
        return await self._intake.receive(token, headers, body)

    async def backfill(
        self, namespace: str, pipeline: str, request: BackfillRequest
    ) -> BackfillResult:
        """One run per window of a schedule in ``[start, end)``; a dry run keeps none."""
        dry_run = request.dry_run

        async def write(conn: Connection) -> BackfillResult:
            result = await backfill_store.backfill(
                conn,
                namespace,
                pipeline,
                schedule=request.schedule,
                start=request.start,
                end=request.end,
                params=request.params,
                create=self._create_run,
                dry_run=dry_run,
            )
            if dry_run:
                raise _Planned(result)
            return result

        try:
            result = await self._tx(write)
        except _Planned as planned:
            return planned.result
        for window in result.windows:
            if window.run_id is not None:
                self.run_metrics.started(namespace, pipeline, "backfill")
        return result

    async def set_schedule_paused(self, namespace: str, name: str, paused: bool) -> bool:
        """Pause, or resume from now (nothing missed is replayed); False when not found."""
        now = datetime.now(UTC)
        grace = self.settings.scheduler_misfire_grace
        return await self._tx(
            lambda c: schedules_store.set_paused(c, namespace, name, paused, now=now, grace=grace)
        )

    async def schedules(
        self, namespace: str, *, cursor: str | None = None, limit: int = 100
    ) -> Page[ScheduleView]:
        after = decode_key(cursor, str)
        rows = await self._read(
            lambda c: reads.schedules(c, namespace, after=after, limit=_limit(limit))
        )
        return _page(rows, limit, lambda r: (r.name,))

    async def schedule(self, namespace: str, name: str) -> ScheduleView | None:
        found = await self._read(
            lambda c: reads.schedules(c, namespace, after=None, limit=1, only=name)
        )
        return found[0] if found else None

    async def firings(self, namespace: str, name: str, *, limit: int = 100) -> list[FiringView]:
        return await self._read(lambda c: reads.firings(c, namespace, name, _limit(limit)))

    async def webhooks(
        self, namespace: str, *, cursor: str | None = None, limit: int = 100
    ) -> Page[WebhookView]:
        """Webhooks by name; a webhook's token is never shown, only its prefix in ``path``."""
        after = decode_key(cursor, str)
        rows = await self._read(
            lambda c: reads.webhooks(c, namespace, after=after, limit=_limit(limit))
        )
        return _page(rows, limit, lambda r: (r.name,))

    async def webhook(self, namespace: str, name: str) -> WebhookView | None:
        found = await self._read(
            lambda c: reads.webhooks(c, namespace, after=None, limit=1, only=name)
        )
        return found[0] if found else None

    async def deliveries(
        self, namespace: str, name: str, *, limit: int = 100
    ) -> list[DeliveryView]:
        return await self._read(lambda c: reads.deliveries(c, namespace, name, _limit(limit)))

    async def notifications(self, namespace: str, run_id: int) -> list[NotificationView]:
        await self._require_run(namespace, run_id)
        return await self._read(lambda c: reads.notifications(c, run_id))

    async def report(self, namespace: str, run_id: int) -> str | None:
        """The run's markdown report, when its pipeline declares one and it rendered."""
        await self._require_run(namespace, run_id)
        return await self._read(lambda c: reads.report(c, run_id))

    # --- REST API reads (issue 12) ---------------------------------------------------

    async def pipeline_versions(
        self, namespace: str, name: str, *, cursor: str | None = None, limit: int = 100
    ) -> Page[PipelineVersionView] | None:
        """A pipeline's versions, newest first; None when there is no such pipeline."""
        before = decode_key(cursor, int)
        rows = await self._read(
            lambda c: api_reads.pipeline_versions(
                c, namespace, name, before=before, limit=_limit(limit)
            )
        )
        return None if rows is None else _page(rows, limit, lambda r: (r.number,))

    async def export(self, namespace: str, name: str, version: int | None = None) -> str | None:
        """The canonical YAML of a stored version (the current one by default)."""
        doc = await self._read(lambda c: api_reads.version_document(c, namespace, name, version))
        return None if doc is None else to_yaml(doc)

    async def plan(self, manifest: Manifest, namespace: str) -> PlanChanges:
        """What applying ``manifest`` would change against the stored current version."""
        if not isinstance(manifest, Pipeline):
            return PlanChanges()
        record = await self.pipeline(namespace, manifest.metadata.name)
        return planning.changes(
            record.document if record else None, manifest, record.digest if record else None
        )

    async def check_stored(self, namespace: str, name: str) -> list[Problem] | None:
        """Re-check the current version against today's catalog and connections."""
        doc = await self._read(lambda c: api_reads.version_document(c, namespace, name, None))
        if doc is None:
            return None
        manifest, problems = parse_manifest(doc)
        if not isinstance(manifest, Pipeline):
            return problems
        names = await self._read(lambda c: connections_store.connection_kinds(c, namespace))
        required = manifest.required_pipelines
        active = await self._read(lambda c: definitions.active_among(c, namespace, required))
        return check_pipeline(manifest) + check_against_catalog(
            manifest,
            self.catalog,
            connections=names,
            enabled_unsafe=self.enabled_unsafe,
            pipelines=active,
            storage_schemes=SERVED_SCHEMES,
        )

    async def connections(
        self, namespace: str, *, cursor: str | None = None, limit: int = 100
    ) -> Page[ConnectionView]:
        """Connections by name, secrets redacted to their field names."""
        after = decode_key(cursor, str)
        rows = await self._read(
            lambda c: api_reads.connections(c, namespace, after=after, limit=_limit(limit))
        )
        return _page(rows, limit, lambda r: (r.name,))

    async def connection(self, namespace: str, name: str) -> ConnectionView | None:
        return await self._read(lambda c: api_reads.connection(c, namespace, name))

    async def check_connection(
        self, namespace: str, name: str, *, within: float = 30.0
    ) -> ConnectionHealth | None:
        """Run the connection kind's ``check()`` here, with the connection opened (its sealed
        fields need this engine's secret key); None when there is no such connection.

        Never raises for the connection's sake: see ``dirigent.engine.health`` for the reasons.
        """
        view = await self.connection(namespace, name)
        if view is None:
            return None

        async def opened() -> dict[str, Any]:
            found = await self._read(
                lambda c: connections_store.open_connection(c, namespace, name, self.sealer)
            )
            return found if found is not None else {}

        kind = self.catalog.connection_kinds.get(view.type)
        return await check_opened(view.type, kind, opened, within=within)

    async def workers(self, *, cursor: str | None = None, limit: int = 100) -> Page[WorkerView]:
        after = decode_key(cursor, str)
        rows = await self._read(lambda c: api_reads.workers(c, after=after, limit=_limit(limit)))
        return _page(rows, limit, lambda r: (r.id,))

    def blocks(self) -> list[BlockView]:
        """The installed blocks with their published schemas (bounded by the code, not paged)."""
        return [_block_view(e) for key, e in sorted(self.catalog.blocks.items()) if key == e.id]

    async def artifacts(
        self, namespace: str, run_id: int, *, cursor: str | None = None, limit: int = 100
    ) -> Page[ArtifactView]:
        await self._require_run(namespace, run_id)
        after = decode_key(cursor, int)
        rows = await self._read(
            lambda c: api_reads.artifacts(c, run_id, after=after, limit=_limit(limit))
        )
        return _page(rows, limit, lambda r: (r.id,))

    async def artifact(
        self, namespace: str, run_id: int, artifact_id: int
    ) -> tuple[ArtifactView, AsyncIterator[bytes]] | None:
        """An artifact's metadata and its content as chunks (inline JSON, or from storage)."""
        found = await self._read(lambda c: api_reads.artifact(c, namespace, run_id, artifact_id))
        if found is None:
            return None
        view, inline, uri = found
        return view, self._content(inline, uri)

    async def _content(self, inline: Any, uri: str | None) -> AsyncIterator[bytes]:
        if uri is None:
            # The bytes the worker measured and hashed when it stored the value inline.
            yield json.dumps(inline, sort_keys=True, separators=(",", ":")).encode()
            return
        data = await self.storage.read_bytes(uri)
        for start in range(0, len(data), 65536):
            yield data[start : start + 65536]

    async def run_status(self, namespace: str, run_id: int) -> str | None:
        """A run's status alone: what a stream checks each cycle, one indexed row."""
        return await self._read(lambda c: api_reads.run_status(c, namespace, run_id))

    async def run_end_cursor(self, namespace: str, run_id: int) -> str | None:
        """The cursor of the run's last event once the run has settled; None while in flight."""
        await self._require_run(namespace, run_id)
        found = await self._read(lambda c: api_reads.run_end_position(c, run_id))
        return None if found is None else encode_cursor(*found)

    @staticmethod
    def beginning() -> str:
        """A subscription cursor before every event: replays a run's story from its start."""
        return encode_cursor(0, 0)

    async def ready(self) -> None:
        """Raise EngineUnavailable unless the database answers a query now."""
        try:
            await asyncio.wait_for(self._read(api_reads.ping), 5)
        except _UNANSWERED as err:
            raise EngineUnavailable(f"the database does not answer: {err}") from None

    async def system_info(self) -> SystemInfo:
        revision = await current_revision(self.direct_url)
        return SystemInfo(
            version=_version(),
            schema_revision=revision,
            plugins=list(self.catalog.plugins),
            blocks=len(self.blocks()),
            connection_kinds=sorted(self.catalog.connection_kinds),
            notifiers=sorted(self.catalog.notifiers),
            enabled_unsafe_blocks=sorted(self.enabled_unsafe),
        )


class _Planned(Exception):
    """Raised inside a dry-run backfill so that no run it created is kept."""

    def __init__(self, result: BackfillResult) -> None:
        self.result = result


class _Broadcast:
    """Wakes every waiting subscriber at once; each wait gets a fresh event."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def waiter(self) -> asyncio.Event:
        return self._event

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()


def _limit(limit: int) -> int:
    if not 1 <= limit <= MAX_PAGE:
        raise ProblemsError(
            [problem("page.limit.invalid", f"limit must be between 1 and {MAX_PAGE}", "limit")]
        )
    return limit


def _page(rows: list[T], limit: int, key: Callable[[T], tuple[Any, ...]]) -> Page[T]:
    more = len(rows) == limit and rows
    return Page(items=rows, next=encode_cursor(*key(rows[-1])) if more else None)


def _block_view(entry: BlockEntry) -> BlockView:
    spec = entry.block.spec
    return BlockView(
        id=entry.id,
        kind=entry.kind,
        plugin=entry.plugin,
        group=spec.group,
        summary=spec.summary,
        description=spec.description,
        local_execution=entry.local_execution,
        connection_fields={f.field: list(f.kinds) for f in spec.connection_fields},
        config_schema=entry.config_schema,
        output_schema=entry.output_schema,
    )


def _version() -> str:
    try:
        return importlib.metadata.version("dirigent-engine")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"
