"""A throwaway local instance: embedded PostgreSQL, migrated, with a worker, in one process.

``dirigent run FILE --local`` (and, later, ``dirigent dev``) stand on this: the same apply,
the same engine, the same worker loop as a cluster — a local run that executed differently
would prove nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from dirigent.engine.plugins import Catalog, discover
from dirigent.engine.runtime.worker import Worker, WorkerConfig
from dirigent.engine.storage import FileStorage
from dirigent.engine.store.database import upgrade_async
from dirigent.engine.store.embedded import EmbeddedPostgres
from dirigent.engine.store.pool import asyncpg_dsn, create_pool
from dirigent.engine.store.versions import VersionCache


@dataclass
class LocalInstance:
    url: str
    pool: asyncpg.Pool
    catalog: Catalog
    storage: FileStorage
    versions: VersionCache
    worker: Worker
    root: Path


@contextlib.asynccontextmanager
async def local_instance(
    *,
    root: Path | None = None,
    keep: bool = False,
    enabled_unsafe: Collection[str] = (),
    concurrency: int = 8,
) -> AsyncIterator[LocalInstance]:
    """Start everything; on exit stop the worker and the server, and delete the root unless kept."""
    base = root or Path(tempfile.mkdtemp(prefix="dirigent-local-"))
    server = EmbeddedPostgres(base / "pgdata")
    await asyncio.to_thread(server.start)
    try:
        await upgrade_async(server.url)
        pool = await create_pool(server.url, max_size=concurrency + 4)
        try:
            catalog = discover()
            storage = FileStorage(base / "artifacts")
            config = WorkerConfig(
                concurrency=concurrency,
                enabled_unsafe=frozenset(enabled_unsafe),
                poll_interval=0.5,
                sweep_interval=5.0,
            )
            worker = Worker(pool, asyncpg_dsn(server.url), catalog, storage, config)
            task = asyncio.create_task(worker.run())
            try:
                yield LocalInstance(
                    server.url, pool, catalog, storage, VersionCache(), worker, base
                )
            finally:
                worker.stop()
                await task
        finally:
            await pool.close()
    finally:
        await asyncio.to_thread(server.stop)
        if not keep and root is None:
            shutil.rmtree(base, ignore_errors=True)
