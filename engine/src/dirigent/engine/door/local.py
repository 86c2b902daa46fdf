"""A throwaway local instance: embedded PostgreSQL, migrated, an Engine and a worker, in one process.

``dirigent run FILE --local`` (and ``dirigent dev``) stand on this: the same apply, the same
engine, the same worker loop as a cluster — a local run that executed differently would
prove nothing.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass
from pathlib import Path

from dirigent.engine.door.engine import Engine
from dirigent.engine.infrastructure.embedded import EmbeddedPostgres
from dirigent.engine.infrastructure.settings import EngineSettings
from dirigent.engine.runtime.worker import Worker
from dirigent.engine.store.schema.database import upgrade_async


@dataclass
class LocalInstance:
    engine: Engine
    worker: Worker
    root: Path


@contextlib.asynccontextmanager
async def local_instance(
    *,
    root: Path | None = None,
    keep: bool = False,
    enabled_unsafe: Collection[str] = (),
    concurrency: int = 8,
    secret_key: str | None = None,
) -> AsyncIterator[LocalInstance]:
    """Start everything; on exit stop the worker and the server, and delete the root unless kept.

    Connection secrets are sealed with ``secret_key``, or with a key made for this instance
    alone (it dies with the instance, as the database does).
    """
    base = root or Path(tempfile.mkdtemp(prefix="dirigent-local-"))
    server = EmbeddedPostgres(base / "pgdata")
    await asyncio.to_thread(server.start)
    try:
        await upgrade_async(server.url)
        settings = EngineSettings(
            database_url=server.url,
            artifact_root=base / "artifacts",
            enabled_unsafe_blocks=list(enabled_unsafe),
            worker_concurrency=concurrency,
            poll_interval=0.5,
            sweep_interval=5.0,
            metrics_port=None,
            secret_key=secret_key or base64.b64encode(os.urandom(32)).decode(),
        )
        async with Engine.open(settings) as engine:
            worker = engine.workers.build()
            task = asyncio.create_task(worker.run())
            try:
                yield LocalInstance(engine, worker, base)
            finally:
                worker.stop()
                await task
    finally:
        await asyncio.to_thread(server.stop)
        if not keep and root is None:
            shutil.rmtree(base, ignore_errors=True)
