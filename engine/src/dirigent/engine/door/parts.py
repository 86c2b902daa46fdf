"""What every facet of the door shares: the pool, the catalog, the caches, the metrics.

One ``Parts`` per ``Engine``; each facet holds it rather than the engine, so a facet can
neither reach another facet's private state nor build a second pool. It also carries the few
steps several facets take the same way: a transaction, a read, "is this run in this
namespace", and creating one run with its metric.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from prometheus_client import CollectorRegistry

from dirigent.engine.infrastructure.artifacts import ArtifactStore
from dirigent.engine.infrastructure.crypto import SecretSealer
from dirigent.engine.infrastructure.plugins import Catalog
from dirigent.engine.infrastructure.settings import EngineSettings
from dirigent.engine.infrastructure.trigger_metrics import RunMetrics
from dirigent.engine.shapes.problems import EngineUnavailable, ProblemsError, problem
from dirigent.engine.store.pool import (
    UNAVAILABLE_ERRORS,
    UNSTORABLE_ERRORS,
    Connection,
    Database,
)
from dirigent.engine.store.queries import reads
from dirigent.engine.store.transactions import runs
from dirigent.engine.store.transactions.runs import RunCreated, RunRequest
from dirigent.engine.store.transactions.versions import VersionCache

T = TypeVar("T")


@dataclass
class Parts:
    settings: EngineSettings
    db: Database
    catalog: Catalog
    registry: CollectorRegistry
    storage: ArtifactStore
    sealer: SecretSealer | None
    enabled_unsafe: frozenset[str]
    versions: VersionCache = field(default_factory=VersionCache)
    run_metrics: RunMetrics = field(init=False)

    def __post_init__(self) -> None:
        self.run_metrics = RunMetrics(self.registry)

    async def tx(self, fn: Callable[[Connection], Awaitable[T]]) -> T:
        with answerable():
            return await self.db.transaction(fn)

    async def read(self, fn: Callable[[Connection], Awaitable[T]]) -> T:
        with answerable():
            return await self.db.read(fn)

    async def require_run(self, namespace: str, run_id: int) -> None:
        """Refuse a run of another namespace exactly as a run that does not exist."""
        found = await self.read(lambda c: reads.run_namespace(c, run_id))
        if found != namespace:
            raise ProblemsError(
                [problem("run.not_found", f"run {run_id} does not exist in {namespace}", "run")]
            )

    async def create_run(self, conn: Connection, request: RunRequest) -> RunCreated:
        """One run inside the caller's transaction (the scheduler and the intake pass this)."""
        return await runs.create_run(
            conn,
            request,
            versions=self.versions,
            catalog=self.catalog,
            enabled_unsafe=self.enabled_unsafe,
        )

    def count_started(self, request: RunRequest, created: RunCreated) -> None:
        if created.created:  # an idempotency key that found its run started nothing
            self.run_metrics.started(request.namespace, request.pipeline, request.triggered_by_kind)


@contextlib.contextmanager
def answerable() -> Iterator[None]:
    """Database failures as the door's refusals: gone is ``EngineUnavailable`` (a 503 at
    the API, readiness false), a value it cannot store is the request's problem (a 422)."""
    try:
        yield
    except UNSTORABLE_ERRORS:
        raise ProblemsError(
            [
                problem(
                    "request.unstorable",
                    "the request holds a value PostgreSQL cannot store (such as a NUL character, U+0000)",
                )
            ]
        ) from None
    except UNAVAILABLE_ERRORS as err:
        reason = (str(err).splitlines() or [type(err).__name__])[0]
        raise EngineUnavailable(f"the database does not answer: {reason}") from None
