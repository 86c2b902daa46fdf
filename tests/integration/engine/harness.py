"""An engine under test: a real database, the installed catalog, workers as asyncio tasks.

Reads like the behaviour it drives: ``await h.apply(YAML)``, ``run = await h.run("p")``,
``await h.until_settled(run)``, then assertions over the rows.
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

from dirigent.engine.applying import Applied, apply_manifest
from dirigent.engine.manifests.loading import parse_manifest, read_text
from dirigent.engine.plugins import Catalog, discover
from dirigent.engine.runtime.worker import Worker, WorkerConfig
from dirigent.engine.storage import FileStorage
from dirigent.engine.store import runs
from dirigent.engine.store.pool import asyncpg_dsn, create_pool, in_transaction
from dirigent.engine.store.runs import RunCreated, RunRequest
from dirigent.engine.store.versions import VersionCache

TERMINAL = ("succeeded", "completed_with_errors", "failed", "cancelled")


class Harness:
    def __init__(self, pool: asyncpg.Pool, url: str, root: Path, catalog: Catalog) -> None:
        self.pool = pool
        self.url = url
        self.dsn = asyncpg_dsn(url)
        self.storage = FileStorage(root)
        self.catalog = catalog
        self.versions = VersionCache()
        self.namespace = "default"

    async def apply(self, text: str) -> Applied:
        """Apply through the same path every door uses (validation included)."""
        docs, problems = read_text(text)
        assert not problems, problems
        manifest, problems = parse_manifest(docs[0].data)
        assert manifest is not None, problems
        return await in_transaction(
            self.pool,
            lambda c: apply_manifest(
                c,
                manifest,
                namespace=self.namespace,
                catalog=self.catalog,
                provenance={"by": "test"},
            ),
        )

    async def run(
        self, pipeline: str, params: dict[str, Any] | None = None, **kw: Any
    ) -> RunCreated:
        request = RunRequest(self.namespace, pipeline, params or {}, **kw)
        return await in_transaction(
            self.pool,
            lambda c: runs.create_run(c, request, versions=self.versions, catalog=self.catalog),
        )

    def worker(self, **kw: Any) -> Worker:
        config = WorkerConfig(**{"poll_interval": 0.2, "sweep_interval": 0.5, **kw})
        return Worker(self.pool, self.dsn, self.catalog, self.storage, config)

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

    async def until_settled(self, run_id: int, timeout: float = 20.0) -> str:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            status = await self.status(run_id)
            if status in TERMINAL:
                return status
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(
                    f"run {run_id} still {status} after {timeout}s: {await self.steps(run_id)}"
                )
            await asyncio.sleep(0.05)

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
async def harness(url: str, root: Path) -> AsyncIterator[Harness]:
    pool = await create_pool(url, max_size=20)
    try:
        yield Harness(pool, url, root, discover())
    finally:
        await pool.close()


def utc(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=dt.UTC)  # type: ignore[misc]
