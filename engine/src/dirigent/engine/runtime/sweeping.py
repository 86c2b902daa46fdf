"""The sweeper: the periodic pass every worker runs beside its claim loop.

One pass gives back expired leases (to waiting when a handle or cursor was committed, else
to the queue), fails the attempts that lost their lease too often, tells the remotes owed a
cancel, marks silent workers gone, flags stuck runs, starts a queued run a lost race left
behind, and prunes history when retention is set. Every statement is safe in several
sweepers at once (``store/sweeping.py``), so every worker runs one and none is elected.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import structlog

from dirigent.engine.infrastructure.artifacts import ArtifactStore
from dirigent.engine.infrastructure.crypto import SecretSealer
from dirigent.engine.infrastructure.metrics import WorkerMetrics
from dirigent.engine.infrastructure.plugins import Catalog
from dirigent.engine.runtime import cancelling
from dirigent.engine.runtime.executing import failure
from dirigent.engine.store.pool import Connection, Pool, in_transaction
from dirigent.engine.store.transactions import claims, counting, sweeping
from dirigent.engine.store.transactions import outcomes as outcome_store
from dirigent.engine.store.transactions import workers as workers_store
from dirigent.engine.store.transactions.runs import start_queued_run
from dirigent.engine.store.transactions.versions import VersionCache
from dirigent.sdk import ErrorClass, StorageError

log = structlog.get_logger("dirigent.worker")


@dataclass(frozen=True)
class SweepSettings:
    interval: float
    lease: dt.timedelta
    stuck_run: dt.timedelta
    max_recoveries: int
    retention_runs: dt.timedelta | None
    retention_logs: dt.timedelta | None


class Sweeper:
    """One worker's sweeper; ``sweeper_id`` (the worker's id) holds the leases it takes."""

    def __init__(
        self,
        pool: Pool,
        catalog: Catalog,
        storage: ArtifactStore,
        settings: SweepSettings,
        *,
        sweeper_id: str,
        versions: VersionCache,
        metrics: WorkerMetrics,
        sealer: SecretSealer | None = None,
    ) -> None:
        self.pool = pool
        # Opens the connections a block's cancel needs (docker.run's cluster), as execute did.
        self.sealer = sealer
        self.catalog = catalog
        self.storage = storage
        self.settings = settings
        self.id = sweeper_id
        self.versions = versions
        self.metrics = metrics

    @contextlib.asynccontextmanager
    async def _conn(self) -> AsyncIterator[Connection]:
        async with self.pool.acquire() as conn:
            yield conn

    async def run(self) -> None:
        """Sweep every ``interval`` until cancelled; a failed pass is logged, not fatal."""
        while True:
            await asyncio.sleep(self.settings.interval)
            try:
                await self.sweep()
            except Exception:
                log.exception("worker.sweep_failed")

    async def sweep(self) -> dict[str, Any]:
        """One pass; safe when every worker runs it at once."""
        s = self.settings
        async with self._conn() as conn:
            recovered = await sweeping.recover_expired(conn, max_recoveries=s.max_recoveries)
        await self._fail_exhausted()
        await cancelling.tell_owed_remotes(
            self.pool, catalog=self.catalog, storage=self.storage, sealer=self.sealer
        )
        async with self._conn() as conn:
            gone = await workers_store.mark_gone(conn, s.lease * 3)
            stuck = await sweeping.detect_stuck(conn, s.stuck_run)
            queued, waiting = await claims.levels(conn)
        self.metrics.lease_recoveries.inc(len(recovered))
        self.metrics.queue_depth.set(queued)
        self.metrics.waiting.set(waiting)
        started = await self._start_stalled_queues()
        counted = await self._finish_counted()
        pruned, logs_pruned, deliveries_pruned = await self._prune()
        if recovered or started or stuck or pruned or logs_pruned or deliveries_pruned or counted:
            log.info(
                "sweeper.pass",
                attempts_recovered=len(recovered),
                fan_outs_finished=counted,
                runs_started=started,
                workers_gone=gone,
                runs_stuck=stuck,
                runs_pruned=len(pruned),
                logs_pruned=logs_pruned,
                deliveries_pruned=deliveries_pruned,
            )
        return {
            "recovered": recovered,
            "runs_started": started,
            "fan_outs_finished": counted,
            "workers_gone": gone,
            "stuck": stuck,
            "pruned": [run.id for run in pruned],
            "logs_pruned": logs_pruned,
            "deliveries_pruned": deliveries_pruned,
        }

    async def _delete_scratch(self, run: sweeping.PrunedRun) -> None:
        """Every object under the run's scratch; a store that fails is logged, not retried
        (the run's rows are gone: nothing would bring the pass back to it)."""
        prefixes = [self.storage.run_prefix(run.namespace, run.id) + "/"]
        if self.storage.files is not None:  # where scratch was before namespaces had a part
            prefixes.append(f"{self.storage.root_uri}/runs/{run.id}/")
        for prefix in prefixes:
            try:
                await self.storage.delete_prefix(prefix)
            except (StorageError, OSError) as err:
                log.warning("retention.scratch_left", run_id=run.id, prefix=prefix, error=str(err))

    async def _fail_exhausted(self) -> None:
        """Attempts that lost their lease too often fail instead of running again."""
        s = self.settings
        async with self._conn() as conn:
            ids = await sweeping.take_exhausted(conn, self.id, s.max_recoveries, s.lease)
            attempts = await claims.load(conn, ids) if ids else []
        if not attempts:
            return
        outcomes = [
            failure(
                a,
                self.id,
                ErrorClass.REJECTED,
                "engine.attempt.unrecoverable",
                f"the attempt lost its worker {s.max_recoveries} times (a worker "
                "died running it, or its outcome could not be recorded); not run again",
            )
            for a in attempts
        ]
        await in_transaction(
            self.pool, lambda conn: outcome_store.record_many(conn, outcomes, self.versions)
        )
        log.warning("sweeper.attempts_unrecoverable", attempts=ids)

    async def _finish_counted(self) -> list[int]:
        """Fan-out steps their counters end that nobody finished: a worker died between
        counting a batch and finishing the step it ended (``store/counting.py``). Returns
        their runs."""
        async with self._conn() as conn:
            rows = await counting.counted_unfinished(conn)
            ended = await counting.ended(conn, rows, self.versions)
        if not ended:
            return []
        await in_transaction(
            self.pool, lambda conn: counting.finish_counted(conn, ended, self.versions)
        )
        return sorted({run_id for run_id, _, _ in ended})

    async def _start_stalled_queues(self) -> list[int]:
        """A pipeline with queued runs and none running gets its oldest queued run started."""
        async with self._conn() as conn:
            pipeline_ids = await sweeping.stalled_queued_pipelines(conn)
        started: list[int] = []
        for pid in pipeline_ids:

            async def start(conn: Connection, pipeline_id: int = pid) -> int | None:
                return await start_queued_run(conn, pipeline_id, self.versions)

            run_id = await in_transaction(self.pool, start)
            if run_id is not None:
                started.append(run_id)
        return started

    async def _prune(self) -> tuple[list[sweeping.PrunedRun], int, int]:
        """Retention, only when set: finished runs (with their scratch storage), then logs and
        webhook deliveries (their age counts like a log line's: ``retention_logs``)."""
        pruned: list[sweeping.PrunedRun] = []
        logs_pruned = deliveries_pruned = 0
        if self.settings.retention_runs is not None:
            async with self._conn() as conn:
                pruned = await sweeping.prune_runs(conn, self.settings.retention_runs)
            for run in pruned:  # a pruned run takes its scratch with it
                await self._delete_scratch(run)
        if self.settings.retention_logs is not None:
            async with self._conn() as conn:
                logs_pruned = await sweeping.prune_logs(conn, self.settings.retention_logs)
                deliveries_pruned = await sweeping.prune_deliveries(
                    conn, self.settings.retention_logs
                )
        return pruned, logs_pruned, deliveries_pruned
