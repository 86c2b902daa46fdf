"""An engine under test: a real database, the installed catalog, workers as asyncio tasks.

Reads like the behaviour it drives: ``await h.apply(YAML)``, ``run = await h.run("p")``,
``await h.until_finished(run)``, then assertions over the rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg

from dirigent.engine import Engine, EngineSettings, RunRequest
from dirigent.engine.door.applying import Applied
from dirigent.engine.infrastructure.plugins import discover
from dirigent.engine.runtime.worker import Worker
from dirigent.engine.shapes.manifests.loading import parse_manifest, read_text
from dirigent.engine.shapes.statuses import RUN_TERMINAL
from dirigent.engine.store.pool import Database, asyncpg_dsn
from dirigent.engine.store.transactions.runs import RunCreated
from tests.waiting import eventually


class Harness:
    """Drives the engine through its door (``Engine``); ``pool`` is for assertions over rows."""

    def __init__(self, engine: Engine, pool: asyncpg.Pool, url: str) -> None:
        self.engine = engine
        self.pool = pool
        self.url = url
        self.dsn = asyncpg_dsn(url)
        self.storage = engine.storage
        self.catalog = engine.catalog
        self.versions = engine.versions
        self.namespace = "default"

    async def apply(self, text: str) -> Applied:
        """Apply through the same path every door uses (validation included)."""
        docs, problems = read_text(text)
        assert not problems, problems
        manifest, problems = parse_manifest(docs[0].data)
        assert manifest is not None, problems
        return await self.engine.manifests.apply(
            manifest, self.namespace, provenance={"by": "test"}
        )

    async def run(
        self, pipeline: str, params: dict[str, Any] | None = None, **kw: Any
    ) -> RunCreated:
        return await self.engine.runs.start(
            RunRequest(self.namespace, pipeline, params or {}, **kw)
        )

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
                lambda: self.status(run_id), lambda s: s in RUN_TERMINAL, timeout=timeout
            )
        except AssertionError:
            status = await self.status(run_id)
            raise AssertionError(
                f"run {run_id} still {status} after {timeout}s: {await self.steps(run_id)}"
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


@contextlib.asynccontextmanager
async def harness(
    url: str, root: Path | str, *, unsafe: tuple[str, ...] = ("testing.unsafe",), **more: Any
) -> AsyncIterator[Harness]:
    """``more``: further EngineSettings (``artifact_connection``, ``secret_key``, ...)."""
    settings = EngineSettings(
        database_url=url,
        artifact_root=root,  # type: ignore[arg-type]  # a folder or a URI
        metrics_port=None,
        enabled_unsafe_blocks=list(unsafe),
        **more,
    )
    database = await Database.connect(url, max_size=20)
    engine = Engine(settings, database, discover())
    try:
        yield Harness(engine, database.pool, url)
    finally:
        await engine.storage.aclose()  # the stores it opened (an S3 client's sessions)
        await database.close()


def utc(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=dt.UTC)  # type: ignore[misc]
