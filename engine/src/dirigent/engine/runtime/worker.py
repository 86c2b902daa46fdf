"""The worker: one claim query in a loop, blocks under a concurrency limit, durable outcomes.

Workers need no dispatcher and no knowledge of each other: ``FOR UPDATE SKIP LOCKED`` keeps
N of them from ever taking the same attempt. An idle worker LISTENs for the NOTIFY that
queuing work sends and claims at once; it also polls every ``poll_interval``, so a lost
notification costs latency, never correctness. A lease, refreshed by one heartbeat statement
for everything the worker holds, is what lets the sweeper recover an attempt whose worker
died; the same heartbeat tells the worker which attempts were cancelled under it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from dirigent.engine.infrastructure.artifacts import ArtifactStore
from dirigent.engine.infrastructure.crypto import SecretSealer
from dirigent.engine.infrastructure.metrics import WorkerMetrics
from dirigent.engine.infrastructure.plugins import Catalog
from dirigent.engine.infrastructure.trigger_metrics import NotificationMetrics
from dirigent.engine.runtime import recording
from dirigent.engine.runtime.executing import Settings, execute_attempt
from dirigent.engine.runtime.notifying import Deliverer, DeliveryConfig
from dirigent.engine.runtime.sweeping import Sweeper, SweepSettings
from dirigent.engine.shapes.attempts import Claimed, Outcome, Parking
from dirigent.engine.store.pool import Connection, Pool, listen
from dirigent.engine.store.transactions import claims
from dirigent.engine.store.transactions import outcomes as outcome_store
from dirigent.engine.store.transactions import workers as workers_store
from dirigent.engine.store.transactions.progress import WORK_CHANNEL
from dirigent.engine.store.transactions.versions import VersionCache

log = structlog.get_logger("dirigent.worker")
VERSION = "0.1.0"


@dataclass
class WorkerConfig:
    concurrency: int = 8
    tags: list[str] = field(default_factory=list)
    poll_interval: float = 1.0
    lease: dt.timedelta = dt.timedelta(seconds=30)
    heartbeat: dt.timedelta = dt.timedelta(seconds=10)
    sweep_interval: float = 5.0
    stuck_run: dt.timedelta = dt.timedelta(hours=1)
    max_recoveries: int = 5  # lost leases before an attempt fails instead of running again
    retention_runs: dt.timedelta | None = None  # unset: nothing is deleted unless asked
    retention_logs: dt.timedelta | None = None
    enabled_unsafe: frozenset[str] = frozenset()
    # How long an attempt this worker cannot run (block not installed, unsafe not enabled)
    # is released for others when no live worker says it can run it; then it fails.
    missing_block_grace: dt.timedelta = dt.timedelta(minutes=5)
    inline_artifact_max: int = 65536
    sealer: SecretSealer | None = None
    worker_id: str = field(
        default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    )
    notification_backoff: dt.timedelta = dt.timedelta(seconds=10)
    notification_attempts: int = 5


class Worker:
    """One worker process's engine loop."""

    def __init__(
        self,
        pool: Pool,
        dsn: str,
        catalog: Catalog,
        storage: ArtifactStore,
        config: WorkerConfig,
        metrics: WorkerMetrics | None = None,
    ) -> None:
        self.pool = pool
        self.metrics = metrics or WorkerMetrics()
        self.dsn = dsn
        self.catalog = catalog
        self.storage = storage
        self.config = config
        self.id = config.worker_id
        self.versions = VersionCache()
        self._settings = Settings(
            config.enabled_unsafe,
            config.inline_artifact_max,
            config.sealer,
            runs_started=self.metrics.runs_started,
        )
        self._tasks: dict[int, asyncio.Task[None]] = {}
        # Attempts whose block has finished and whose outcome waits for the writer's commit:
        # they hold a lease but no execution slot, so the next claim overlaps the commit.
        self._committing: set[int] = set()
        # Outcomes wait here for the recorder, which records whatever has gathered in one
        # transaction: a wide fan-out records in batches instead of one commit per item.
        self._outcomes: asyncio.Queue[tuple[Outcome | Parking, asyncio.Future[None]]] = (
            asyncio.Queue()
        )
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self.executed = 0  # attempts this worker recorded or parked; for tests and metrics
        self.sweeper = Sweeper(
            pool,
            catalog,
            storage,
            SweepSettings(
                interval=config.sweep_interval,
                lease=config.lease,
                stuck_run=config.stuck_run,
                max_recoveries=config.max_recoveries,
                retention_runs=config.retention_runs,
                retention_logs=config.retention_logs,
            ),
            sweeper_id=self.id,
            sealer=config.sealer,
            versions=self.versions,
            metrics=self.metrics,
        )

    @contextlib.asynccontextmanager
    async def _conn(self) -> AsyncIterator[Connection]:
        async with self.pool.acquire() as conn:
            yield conn

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()

    async def run(self) -> None:
        """Run until ``stop()``; then finish in-flight work briefly and hand back what remains."""
        async with self._conn() as conn:
            await workers_store.register(
                conn,
                self.id,
                hostname=socket.gethostname(),
                version=VERSION,
                plugins=list(self.catalog.plugins),
                tags=self.config.tags,
                concurrency=self.config.concurrency,
                blocks=sorted(b for b in self.catalog.blocks if self._cannot_run(b) is None),
            )
        log.info("worker.started", worker=self.id, concurrency=self.config.concurrency)
        listener = await listen(self.dsn, WORK_CHANNEL, self._wake.set)
        background = [
            asyncio.create_task(self._heartbeat_loop()),
            asyncio.create_task(self.sweeper.run()),
            asyncio.create_task(self._record_loop()),
            asyncio.create_task(self._deliverer().run()),
        ]
        try:
            await self._claim_loop()
        finally:
            await self._drain()
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            with contextlib.suppress(Exception):
                await listener.close()
            async with self._conn() as conn:
                await workers_store.stopped(conn, self.id)
            log.info("worker.stopped", worker=self.id)

    def _deliverer(self) -> Deliverer:
        """Alert delivery rides along with every worker (runtime.notifying)."""
        c = self.config
        config = DeliveryConfig(
            c.worker_id,
            c.poll_interval,
            c.sweep_interval,
            c.lease,
            c.notification_backoff,
            c.notification_attempts,
        )
        metrics = NotificationMetrics(self.metrics.registry)
        return Deliverer(self.pool, self.catalog, c.sealer, config, metrics)

    async def _drain(self, grace: float = 5.0) -> None:
        if self._tasks:
            await asyncio.wait(list(self._tasks.values()), timeout=grace)
        for task in list(self._tasks.values()):
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        async with self._conn() as conn:
            handed = await workers_store.hand_back(conn, self.id)
        if handed:
            log.info("worker.leases_handed_back", count=handed)

    async def _claim_loop(self) -> None:
        while not self._stopping.is_set():
            # Cleared on every turn, full or not: with every slot busy, a wake-up already set
            # (a NOTIFY from anyone's commit) would otherwise make the wait below return at
            # once, and the loop would spin on the CPU until a slot freed.
            self._wake.clear()
            free = self._free_slots()
            claimed: list[Claimed] = []
            if free > 0:
                async with self._conn() as conn:
                    claimed = await claims.claim(
                        conn, self.id, limit=free, tags=self.config.tags, lease=self.config.lease
                    )
                now = dt.datetime.now(dt.UTC)
                for attempt in claimed:
                    self.metrics.claim_latency.observe(
                        max(0.0, (now - attempt.due_at).total_seconds())
                    )
                    task = asyncio.create_task(self._process(attempt))
                    self._tasks[attempt.id] = task
                    task.add_done_callback(self._done_callback(attempt.id))
                self.metrics.in_flight.set(len(self._tasks))
            if claimed and len(claimed) == free:
                continue  # there may be more: go round without waiting
            wait = self.config.poll_interval
            if free > 0:
                async with self._conn() as conn:
                    due = await claims.next_due(conn)
                if due is not None:
                    wait = min(wait, max(0.005, (due - dt.datetime.now(dt.UTC)).total_seconds()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    def _free_slots(self) -> int:
        """Execution slots free, while no more than ``concurrency`` outcomes await a commit.

        Concurrency bounds blocks executing; an attempt whose outcome is with the writer
        executes nothing, so its slot goes to the next claim (claim and commit overlap
        instead of alternating). What a worker holds stays bounded by twice its concurrency.
        """
        executing = len(self._tasks) - len(self._committing)
        limit = self.config.concurrency
        return min(limit - executing, 2 * limit - len(self._tasks))

    def _done_callback(self, attempt_id: int) -> Callable[[asyncio.Task[None]], None]:
        def done(_task: asyncio.Task[None]) -> None:
            self._tasks.pop(attempt_id, None)
            self._committing.discard(attempt_id)
            self.metrics.in_flight.set(len(self._tasks))
            self._wake.set()  # a slot freed

        return done

    async def _process(self, attempt: Claimed) -> None:
        structlog.contextvars.bind_contextvars(
            run_id=attempt.run_id, step=attempt.step, attempt=attempt.number
        )
        started = time.monotonic()
        try:
            missing = self._cannot_run(attempt.block)
            if missing is not None and await self._release(attempt, missing):
                return
            pipeline = self.versions.peek(attempt.version_id)
            if pipeline is None:
                async with self._conn() as conn:
                    pipeline = await self.versions.get(conn, attempt.version_id)
            executed = await execute_attempt(
                self._conn,
                attempt,
                worker_id=self.id,
                pipeline=pipeline,
                catalog=self.catalog,
                storage=self.storage,
                settings=self._settings,
                on_fetched=self._record_fetched,
            )
            result = recording.storable(executed, self.id)
            await self._record(result)
            self.executed += 1
            outcome = result.status if isinstance(result, Outcome) else "parked"
            self.metrics.attempts.labels(attempt.block, outcome).inc()
            self.metrics.attempt_duration.labels(attempt.block).observe(time.monotonic() - started)
        except asyncio.CancelledError:
            log.info("attempt.abandoned", attempt_id=attempt.id)
            raise
        except Exception:
            # The engine's own failure, not the block's: leave the lease to expire so the
            # sweeper recovers the attempt rather than recording a misleading outcome.
            log.exception("attempt.engine_error", attempt_id=attempt.id)
        finally:
            structlog.contextvars.clear_contextvars()

    def _cannot_run(self, block: str) -> str | None:
        """Why this worker cannot run a block, or None when it can."""
        entry = self.catalog.block(block)
        if entry is None:
            return f"block '{block}' is not installed here"
        if entry.local_execution and block not in self.config.enabled_unsafe:
            return f"block '{block}' executes code on workers and is not enabled here"
        return None

    async def _release(self, attempt: Claimed, reason: str) -> bool:
        """Leave an attempt this worker cannot run to one that can; False: none can, fail it."""
        async with self._conn() as conn:
            released = await workers_store.release_unrunnable(
                conn,
                attempt.id,
                self.id,
                block=attempt.block,
                reason=reason,
                live_within=max(self.config.lease, self.config.heartbeat * 3),
                grace=self.config.missing_block_grace,
                delay=dt.timedelta(seconds=self.config.poll_interval),
            )
        if released:
            log.warning("attempt.released", attempt_id=attempt.id, reason=reason)
            self.metrics.attempts.labels(attempt.block, "released").inc()
        return released

    async def _record(self, outcome: Outcome | Parking) -> None:
        """Hand the outcome (or parking) to the writer and wait until it is committed.

        The lease is held until then (the heartbeat keeps it); the execution slot is given
        back at once, so the claim loop may take the next attempt meanwhile.
        """
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._committing.add(outcome.attempt.id)
        self._wake.set()
        await self._outcomes.put((outcome, done))
        await done

    async def _record_loop(self) -> None:
        """The writer: records the outcomes and parks the attempts gathered, in one transaction."""
        while True:
            batch = [await self._outcomes.get()]
            # Let attempts finishing in this same moment join the batch: a few loop turns,
            # no timer, so a lone attempt is not delayed.
            for _ in range(3):
                await asyncio.sleep(0)
            while not self._outcomes.empty():
                batch.append(self._outcomes.get_nowait())
            outcomes = [o for o, _ in batch if isinstance(o, Outcome)]
            parkings = [o for o, _ in batch if isinstance(o, Parking)]
            written = await self._count(
                [o for o in outcomes if recording.countable(o, self.versions)]
            )
            counted = {e.attempt.id for e, _ in written}
            outcomes = [o for o in outcomes if o.attempt.id not in counted]
            written += await recording.record(self.pool, self._write, self.id, outcomes, parkings)
            parked: set[int] = set()
            recorded: dict[int, outcome_store.RecordResult] = {}
            for _, (ids, by_attempt) in written:
                parked |= ids
                recorded.update(by_attempt)
            finished = {
                (o.attempt.run_id, o.attempt.namespace, o.attempt.pipeline, s.run_status)
                for o, _ in batch
                if (s := recorded.get(o.attempt.id)) is not None and s.run_status is not None
            }
            for _, namespace, pipeline, state in finished:
                self.metrics.runs_finished.labels(namespace, pipeline, state).inc()
            kept = {i for i, s in recorded.items() if not s.discarded}
            for item, done in batch:
                if item.attempt.id not in parked | kept:
                    log.info(
                        "attempt.discarded", attempt_id=item.attempt.id, reason="no longer held"
                    )
                if not done.done():
                    done.set_result(None)

    async def _count(self, items: list[Outcome]) -> list[tuple[recording.Entry, recording.Written]]:
        """Fan-out items that will not retry: counted without their run's lock (``counting``)."""
        if not items:
            return []
        counted = await recording.count_items(self.pool, self.versions, self.id, items)
        return [] if counted is None else list(counted)

    async def _write(
        self, conn: Connection, outcomes: list[Outcome], parkings: list[Parking]
    ) -> tuple[set[int], dict[int, outcome_store.RecordResult]]:
        """One writer transaction: parkings and outcomes together (see ``store.outcomes``).

        Locks as few rows as the batch needs, each taken once: a batch of only outcomes is
        locked by ``record_many`` itself (locking it here as well cost two more round trips
        while holding the run rows every other worker's outcome for that run waits on); a
        batch of only parkings (sensors poked, jobs probed) changes no run or step, so it
        locks just its attempt rows, in id order, and never queues behind a run's writers.
        """
        if parkings and outcomes:
            await outcome_store.lock_batch(
                conn, [o.attempt for o in outcomes] + [p.attempt for p in parkings], self.versions
            )
        elif parkings:
            await claims.lock_attempts(conn, [p.attempt.id for p in parkings])
        parked = await outcome_store.park_many(conn, self.id, parkings)
        recorded = await outcome_store.record_many(conn, outcomes, self.versions)
        return parked, {o.attempt.id: s for o, s in zip(outcomes, recorded, strict=True)}

    async def _record_fetched(self, attempt: Claimed, value: Any) -> None:
        async with self._conn() as conn:
            await outcome_store.record_fetched(conn, attempt, self.id, value)

    async def _heartbeat_loop(self) -> None:
        interval = self.config.heartbeat.total_seconds()
        while True:
            await asyncio.sleep(interval)
            try:
                ids = list(self._tasks)
                async with self._conn() as conn:
                    held = await claims.heartbeat(conn, self.id, ids, self.config.lease)
                    await workers_store.seen(conn, self.id)
                for lost in set(ids) - held:
                    task = self._tasks.get(lost)
                    if task is not None and not task.done():
                        log.info("attempt.cancelled_under_worker", attempt_id=lost)
                        task.cancel()
            except Exception:
                log.exception("worker.heartbeat_failed")

    async def sweep(self) -> dict[str, Any]:
        """One sweeper pass now (``runtime/sweeping.py``); the worker also runs them on a timer."""
        return await self.sweeper.sweep()
