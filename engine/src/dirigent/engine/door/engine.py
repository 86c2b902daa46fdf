"""The engine's one door: every process reaches the engine through ``Engine``.

The operator, the REST API, the scheduler, ``dirigent dev``, ``dirigent run --local``, the
benches and the tests all hold an ``Engine`` and call the verbs of its facets, cut by
resource the way the REST API's routers are:

- ``engine.manifests``: apply, plan and delete any of the four kinds;
- ``engine.pipelines``: stored pipelines, versions, summaries, export, re-checks;
- ``engine.runs``: start, cancel, retry, and every read of a run (detail, items, attempts,
  logs, failures, notifications, report, artifacts);
- ``engine.events``: subscribe to run, step and attempt transitions from a cursor;
- ``engine.triggers``: schedules, webhooks, backfills, the scheduler and the webhook intake;
- ``engine.connections``: stored connections and their health checks;
- ``engine.workers``: build a worker, list the workers;
- ``engine.system``: installed blocks, readiness, installation info;
- ``Engine.migrate`` / ``Engine.schema_head``: the schema, before any engine exists.

It owns the pool, the catalog, the version cache, the secret sealer, the artifact store
(every storage scheme's opened stores, closed with the engine) and every transaction; a caller never sees a connection. Built once per process from
``EngineSettings`` (``Engine.open``), so two engines in one process never share state.

Errors a person can act on are ``ProblemsError`` (a list of located problems with dotted
codes); ``EngineUnavailable`` means the database cannot be used at all (unreachable, or not
migrated) or the artifact root cannot be (no installed backend serves its scheme), with one
line saying what to do.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from prometheus_client import CollectorRegistry

from dirigent.engine.door import migrating
from dirigent.engine.door.connections import Connections
from dirigent.engine.door.events import Events
from dirigent.engine.door.manifests import Manifests
from dirigent.engine.door.parts import Parts
from dirigent.engine.door.pipelines import Pipelines
from dirigent.engine.door.runs import Runs
from dirigent.engine.door.system import System
from dirigent.engine.door.triggers import Triggers
from dirigent.engine.door.workers import Workers
from dirigent.engine.infrastructure.artifacts import ArtifactStore
from dirigent.engine.infrastructure.crypto import SecretSealer
from dirigent.engine.infrastructure.plugins import Catalog, discover
from dirigent.engine.infrastructure.settings import EngineSettings
from dirigent.engine.runtime.connecting import connection_reader
from dirigent.engine.shapes.problems import EngineUnavailable
from dirigent.engine.store.pool import Database
from dirigent.engine.store.schema.database import MigrationResult, require_head
from dirigent.sdk import StorageRefused

__all__ = ["Engine"]


class Engine:
    """One per process. Build with ``async with Engine.open(settings) as engine``."""

    def __init__(
        self,
        settings: EngineSettings,
        database: Database,
        catalog: Catalog,
        registry: CollectorRegistry | None = None,
    ) -> None:
        sealer = SecretSealer.from_settings(settings) if settings.secret_key is not None else None
        # The process's registry (it serves it on its metrics port): runs started, and the
        # scheduler's and the intake's collectors, land beside the process's own.
        parts = Parts(
            settings=settings,
            db=database,
            catalog=catalog,
            registry=registry or CollectorRegistry(),
            storage=_artifact_store(settings, catalog, database, sealer),
            sealer=sealer,
            enabled_unsafe=frozenset(settings.enabled_unsafe_blocks),
        )
        self._parts = parts
        self.settings = settings
        self.registry = parts.registry
        self.catalog = catalog
        self.storage = parts.storage
        self.versions = parts.versions
        self.enabled_unsafe = parts.enabled_unsafe
        self.runs = Runs(parts)
        self.manifests = Manifests(parts, self.runs)
        self.pipelines = Pipelines(parts)
        self.events = Events(parts)
        self.triggers = Triggers(parts)
        self.connections = Connections(parts)
        self.workers = Workers(parts)
        self.system = System(parts)

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
            engine = cls(settings, database, catalog or discover(), registry)
            try:
                yield engine
            finally:
                await engine.storage.aclose()  # the stores it opened (an S3 client's sessions)
        finally:
            await database.close()

    @staticmethod
    async def migrate(url: str, revision: str = "head") -> MigrationResult:
        """Bring the database at ``url`` to ``revision``; raises ``MigrationFailed``."""
        return await migrating.migrate(url, revision)

    @staticmethod
    def schema_head() -> str:
        """The schema revision this release expects."""
        return migrating.schema_head()


def _artifact_store(
    settings: EngineSettings, catalog: Catalog, database: Database, sealer: SecretSealer | None
) -> ArtifactStore:
    """The process's artifact store; a root no installed backend serves stops the process
    with one line (as an unusable database does), not at the first artifact."""
    try:
        return ArtifactStore.from_settings(
            settings, catalog, connection_reader(database.pool.acquire, sealer)
        )
    except StorageRefused as err:
        raise EngineUnavailable(f"DIRIGENT_ARTIFACT_ROOT: {err}") from None
