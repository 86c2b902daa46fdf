"""An engine under test: a real database, the installed catalog, workers as asyncio tasks.

Reads like the behaviour it drives: ``await h.apply(YAML)``, ``run = await h.run("p")``,
``await h.until_finished(run.run_id)``, then assertions over the rows. Everything it does to
the engine goes through the door (``Engine.open`` and the facets); its own ``pool`` is for
what a test asserts or holds on purpose (rows read back, a row lock a test keeps), so
nothing here reaches below ``dirigent.engine``'s public names.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncpg
import pytest
from prometheus_client import CollectorRegistry

from dirigent.engine import (
    Applied,
    Engine,
    EngineSettings,
    ManualRetry,
    RunCreated,
    RunRequest,
)
from dirigent.engine.shapes.manifests.loading import parse_manifest, read_text
from dirigent.engine.shapes.statuses import RUN_TERMINAL
from tests.support.postgres import plain_dsn, rows_pool
from tests.support.waiting import WaitTimedOut, eventually

if TYPE_CHECKING:
    from dirigent.engine.runtime.worker import Worker

# A fixed secret key (base64 of 32 bytes) for engines that seal webhook tokens and connections.
SECRET_KEY = base64.b64encode(bytes(range(32))).decode()


class Harness:
    """Drives the engine through its door (``Engine``); ``pool`` is for assertions over rows."""

    def __init__(
        self,
        engine: Engine,
        pool: asyncpg.Pool,
        url: str,
        close_engine: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.engine = engine
        self.pool = pool
        self.url = url
        self._close_engine = close_engine
        self.dsn = plain_dsn(url)
        self.storage = engine.storage
        self.catalog = engine.catalog
        self.versions = engine.versions
        self.namespace = "default"

    async def apply(self, text: str, **kw: Any) -> Applied:
        """Apply through the same path every door uses (validation included)."""
        docs, problems = read_text(text)
        assert not problems, problems
        manifest, problems = parse_manifest(docs[0].data)
        assert manifest is not None, problems
        return await self.engine.manifests.apply(
            manifest, self.namespace, provenance={"by": "test"}, **kw
        )

    async def run(
        self, pipeline: str, params: dict[str, Any] | None = None, **kw: Any
    ) -> RunCreated:
        return await self.engine.runs.start(
            RunRequest(self.namespace, pipeline, params or {}, **kw)
        )

    async def close_engine(self) -> None:
        """Close the engine now (``Engine.open``'s exit: its pool and listener), as a process
        whose database connections are all gone at once; ``pool`` stays open."""
        assert self._close_engine is not None, "this engine was not opened by harness()"
        await self._close_engine()

    async def cancel(self, run_id: int, reason: str = "test") -> int:
        """Cancel a run; returns how many remote jobs were told."""
        return await self.engine.runs.cancel(self.namespace, run_id, reason=reason)

    async def retry(self, run_id: int, step: str, key: str) -> ManualRetry:
        return await self.engine.runs.retry(self.namespace, run_id, step, idempotency_key=key)

    def worker(self, **kw: Any) -> Worker:
        defaults = {"poll_interval": 0.2, "sweep_interval": 0.5, "enabled_unsafe": frozenset()}
        return self.engine.workers.build(**{**defaults, **kw})

    @contextlib.asynccontextmanager
    async def workers(self, n: int = 1, **kw: Any) -> AsyncIterator[list[Worker]]:
        started = [self.worker(**kw) for _ in range(n)]
        tasks = [asyncio.create_task(w.run()) for w in started]
        try:
            yield started
        finally:
            for w in started:
                w.stop()
            await asyncio.gather(*tasks)

    async def status(self, run_id: int) -> str:
        async with self.pool.acquire() as conn:
            return str(await conn.fetchval("SELECT status FROM runs WHERE id = $1", run_id))

    async def until_finished(self, run_id: int, timeout: float = 20.0) -> str:
        try:
            return await eventually(
                lambda: self.status(run_id),
                lambda s: s in RUN_TERMINAL,
                what=f"run {run_id} finished",
                timeout=timeout,
            )
        except WaitTimedOut as timed_out:
            raise WaitTimedOut(
                f"run {run_id} finished (its steps: {await self.steps(run_id)})",
                timed_out.timeout,
                timed_out.last,
                timed_out.tries,
            ) from None

    async def steps(self, run_id: int) -> dict[str, str]:
        async with self.pool.acquire() as conn:
            rows = await conn.fetch("SELECT step, status FROM run_steps WHERE run_id = $1", run_id)
        return {r["step"]: r["status"] for r in rows}

    async def attempts(self, run_id: int, step: str | None = None) -> list[dict[str, Any]]:
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(
                """SELECT * FROM step_attempts WHERE run_id = $1 AND ($2::text IS NULL OR step = $2)
                   ORDER BY step, item_index NULLS FIRST, number""",
                run_id,
                step,
            )
        return [dict(r) for r in rows]

    async def logs(self, run_id: int) -> list[dict[str, Any]]:
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT * FROM log_entries WHERE run_id = $1 ORDER BY id", run_id
            )
        return [dict(r) for r in rows]

    async def fetchval(self, sql: str, *args: Any) -> Any:
        async with self.pool.acquire() as conn:
            return await conn.fetchval(sql, *args)

    async def execute(self, sql: str, *args: Any) -> str:
        async with self.pool.acquire() as conn:
            return str(await conn.execute(sql, *args))


@contextlib.asynccontextmanager
async def harness(
    url: str,
    root: Path | str,
    *,
    unsafe: tuple[str, ...] = ("testing.unsafe",),
    registry: CollectorRegistry | None = None,
    **settings: Any,
) -> AsyncIterator[Harness]:
    """An engine opened on ``url`` (``Engine.open``, which closes the stores it opened);
    ``root`` is the artifact root, a folder or a URI; ``settings`` add to its EngineSettings
    (a ``secret_key``, an ``artifact_connection``, scheduler timings); ``registry`` is the
    process's metrics registry."""
    full = EngineSettings(
        database_url=url,
        artifact_root=root,  # a folder or a URI
        metrics_port=None,
        enabled_unsafe_blocks=list(unsafe),
        **settings,
    )
    # Its own exit stack, so a test can close the engine early (a second close does nothing).
    opened = contextlib.AsyncExitStack()
    engine = await opened.enter_async_context(Engine.open(full, pool_size=20, registry=registry))
    try:
        pool = await rows_pool(url)
        try:
            yield Harness(engine, pool, url, opened.aclose)
        finally:
            await pool.close()
    finally:
        await opened.aclose()


def spawn_worker(
    db_url: str, root: Path, *, concurrency: int = 8, extra: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """A real `dirigent worker` process on the test database."""
    env = {
        **os.environ,
        "DIRIGENT_DATABASE_URL": db_url,
        "DIRIGENT_ARTIFACT_ROOT": str(root),
        "DIRIGENT_WORKER_CONCURRENCY": str(concurrency),
        "DIRIGENT_POLL_INTERVAL": "0.2",
        "DIRIGENT_METRICS_PORT": "0",
        **(extra or {}),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "dirigent.cli", "worker"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Worker processes a test started; stopped (SIGTERM, then SIGKILL) afterwards."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in started:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()


COUNTERS = """
SELECT s.run_id, s.step,
       (s.items_succeeded, s.items_failed, s.items_skipped, s.items_cancelled) AS counted,
       (count(*) FILTER (WHERE i.status = 'succeeded'), count(*) FILTER (WHERE i.status = 'failed'),
        count(*) FILTER (WHERE i.status = 'skipped'), count(*) FILTER (WHERE i.status = 'cancelled'))
           AS grouped
FROM run_steps s LEFT JOIN run_items i ON i.run_id = s.run_id AND i.step = s.step
WHERE s.items IS NOT NULL
GROUP BY s.id
"""


async def counter_drift(h: Harness) -> list[tuple[int, str, object, object]]:
    """Fan-out steps whose counters are not exactly their items' statuses."""
    async with h.pool.acquire() as conn:
        rows = await conn.fetch(COUNTERS)
    return [
        (r["run_id"], r["step"], tuple(r["counted"]), tuple(r["grouped"]))
        for r in rows
        if tuple(r["counted"]) != tuple(r["grouped"])
    ]


ATTEMPTS = """
SELECT s.run_id, s.step, s.attempts AS counted, count(a.id) AS grouped
FROM run_steps s LEFT JOIN step_attempts a ON a.run_id = s.run_id AND a.step = s.step
GROUP BY s.id HAVING s.attempts <> count(a.id)
"""


async def attempt_drift(h: Harness) -> list[tuple[int, str, int, int]]:
    """Steps whose attempt counter is not exactly their attempts."""
    async with h.pool.acquire() as conn:
        rows = await conn.fetch(ATTEMPTS)
    return [(r["run_id"], r["step"], r["counted"], r["grouped"]) for r in rows]


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> dt.datetime:
    """A moment in UTC, as schedules and backfills are written in tests."""
    return dt.datetime(year, month, day, hour, minute, tzinfo=dt.UTC)
