"""The scheduler: one leader, chosen by a PostgreSQL advisory lock, fires what is due.

The lock is a session lock held on a connection of its own (never a pooled one), so it lives
exactly as long as the leader's session: a leader that dies — SIGKILL included — loses it
when PostgreSQL sees the connection close, and a waiting instance takes over on its next
try. A tick is an indexed range scan over ``next_fire_at``; each firing is its own
transaction (``store.schedules.fire``), which re-checks the slot under a row lock, so even an
overlapping hand-over cannot fire a slot twice. The clock is injectable for tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from dirigent.engine.infrastructure.trigger_metrics import RunMetrics, SchedulerMetrics
from dirigent.engine.rules.firing import DEFAULT_CATCH_UP, DEFAULT_GRACE
from dirigent.engine.store.pool import DATABASE_ERRORS, Connection, Pool, connect, in_transaction
from dirigent.engine.store.transactions import leadership, schedules
from dirigent.engine.store.transactions.schedules import CreateRun, Fired

log = structlog.get_logger("dirigent.scheduler")

# Arbitrary but fixed: "dir" "sched".
SCHEDULER_LOCK_ID = 0x646972_736368


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass
class SchedulerConfig:
    tick: float = 1.0  # the longest a leader sleeps between looks at the clock
    grace: dt.timedelta = DEFAULT_GRACE
    catch_up: int = DEFAULT_CATCH_UP  # slots one schedule may owe before the rest misfire
    batch: int = 200  # due schedules read per query
    concurrency: int = 2  # transactions of firings in flight at once
    per_transaction: int = 25  # firings committed together (each with its run and clock)
    lock_id: int = SCHEDULER_LOCK_ID
    clock: Callable[[], dt.datetime] = field(default=_utcnow)


class Scheduler:
    """``await run()`` until ``stop()``; leads when it holds the lock, else waits for it."""

    def __init__(
        self,
        pool: Pool,
        dsn: str,
        create: CreateRun,
        config: SchedulerConfig,
        metrics: SchedulerMetrics | None = None,
        runs: RunMetrics | None = None,
    ) -> None:
        self.pool = pool
        self.dsn = dsn
        self.create = create
        self.config = config
        self.metrics = metrics or SchedulerMetrics()
        self.runs = runs or RunMetrics()
        self.is_leader = False
        self.fired = 0  # firings this instance made (failed ones included)
        self._stopping = asyncio.Event()

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        while not self._stopping.is_set():
            try:
                # Named with the pid, so an operator (and a test) can see who leads.
                conn = await connect(
                    self.dsn,
                    server_settings={"application_name": f"dirigent-scheduler:{os.getpid()}"},
                )
            except DATABASE_ERRORS as err:
                log.warning("scheduler.connect_failed", error=str(err))
                await self._sleep(self.config.tick)
                continue
            try:
                await self._lead(conn)
            except DATABASE_ERRORS as err:
                log.warning("scheduler.leadership_lost", error=str(err))
            finally:
                self.is_leader = False
                with contextlib.suppress(Exception):
                    await conn.close()

    async def _lead(self, conn: Connection) -> None:
        """Wait for the lock on ``conn``, then fire until stopped or the session breaks."""
        while not self._stopping.is_set():
            if await leadership.try_lead(conn, self.config.lock_id):
                break
            await self._sleep(self.config.tick)
        else:
            return
        self.is_leader = True
        log.info("scheduler.leading")
        while not self._stopping.is_set():
            await leadership.still_connected(conn)  # the session (and so the lock) is ours
            await self.tick()
            async with self.pool.acquire() as pooled:
                upcoming = await schedules.next_due(pooled)
            wait = self.config.tick
            if upcoming is not None:
                wait = min(wait, max(0.0, (upcoming - self.config.clock()).total_seconds()))
            await self._sleep(max(wait, 0.005))

    async def tick(self) -> list[Fired]:
        """Fire everything due now; returns the firings made.

        Due schedules are fired in small batches, one transaction per batch: each firing
        still commits with its run and its clock (a savepoint isolates a refused one), and a
        thousand schedules due in the same minute cost tens of commits, not a thousand.
        """
        out: list[Fired] = []
        gate = asyncio.Semaphore(self.config.concurrency)
        while not self._stopping.is_set():
            now = self.config.clock()
            async with self.pool.acquire() as conn:
                ids = await schedules.due(conn, now, self.config.batch)
            if not ids:
                break
            size = self.config.per_transaction
            chunks = [ids[i : i + size] for i in range(0, len(ids), size)]

            async def one(chunk: list[int]) -> list[Fired]:
                async with gate:
                    return await self._fire(chunk)

            for done in await asyncio.gather(*(one(c) for c in chunks)):
                out += done
            if len(ids) < self.config.batch:
                break
        return out

    async def _fire(self, ids: list[int]) -> list[Fired]:
        now = self.config.clock()

        async def fire_all(conn: Connection) -> list[Fired]:
            made = []
            for schedule_id in ids:
                fired = await schedules.fire(
                    conn,
                    schedule_id,
                    now=now,
                    grace=self.config.grace,
                    create=self.create,
                    catch_up=self.config.catch_up,
                )
                if fired is not None:
                    made.append(fired)
            return made

        try:
            done = await in_transaction(self.pool, fire_all)
        except Exception:
            log.exception("scheduler.firing_error", schedule_ids=ids)
            return []
        for fired in done:
            self._observe(fired)
        return done

    def _observe(self, fired: Fired) -> None:
        self.fired += 1
        self.metrics.firings.labels("fired" if fired.ok else "failed").inc()
        self.metrics.lag.observe(max(0.0, fired.firing.lag.total_seconds()))
        if fired.firing.misfire:
            self.metrics.misfires.inc()
        if fired.ok:
            self.runs.started(fired.namespace, fired.pipeline, "schedule")
        log.info(
            "scheduler.fired" if fired.ok else "scheduler.firing_failed",
            schedule=f"{fired.namespace}/{fired.name}",
            run_id=fired.run_id,
            scheduled_for=fired.firing.scheduled_for.isoformat(),
            misfire=fired.firing.misfire,
            message=fired.message,
        )

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)
