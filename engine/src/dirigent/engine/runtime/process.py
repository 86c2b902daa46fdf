"""Assembling a worker process from settings: pool, catalog, storage, sealer.

Used by ``dirigent worker`` and ``dirigent dev``; the pieces are built once, here, and
handed down — nothing below reads the environment.
"""

from __future__ import annotations

import asyncio
import signal

from dirigent.engine.infrastructure.artifacts import ArtifactStore
from dirigent.engine.infrastructure.crypto import SecretSealer
from dirigent.engine.infrastructure.metrics import WorkerMetrics
from dirigent.engine.infrastructure.plugins import discover
from dirigent.engine.infrastructure.settings import EngineSettings
from dirigent.engine.runtime.connecting import connection_reader
from dirigent.engine.runtime.worker import Worker, WorkerConfig
from dirigent.engine.store.pool import asyncpg_dsn, create_pool


def worker_config(settings: EngineSettings) -> WorkerConfig:
    return WorkerConfig(
        concurrency=settings.worker_concurrency,
        tags=list(settings.worker_tags),
        poll_interval=settings.poll_interval,
        lease=settings.lease_duration,
        heartbeat=settings.heartbeat_interval,
        sweep_interval=settings.sweep_interval,
        stuck_run=settings.stuck_run,
        max_recoveries=settings.max_recoveries,
        retention_runs=settings.retention_runs,
        retention_logs=settings.retention_logs,
        enabled_unsafe=frozenset(settings.enabled_unsafe_blocks),
        inline_artifact_max=settings.inline_artifact_max,
        sealer=SecretSealer.from_settings(settings) if settings.secret_key is not None else None,
        notification_backoff=settings.notification_backoff,
        notification_attempts=settings.notification_max_attempts,
    )


async def run_worker(settings: EngineSettings, url: str | None = None) -> None:
    """Run one worker until SIGTERM/SIGINT; then finish or hand back what it holds."""
    url = url or settings.require_database_url()
    config = worker_config(settings)
    pool = await create_pool(url, max_size=settings.database_pool_size)
    catalog = discover()
    storage = ArtifactStore.from_settings(
        settings, catalog, connection_reader(pool.acquire, config.sealer)
    )
    try:
        metrics = WorkerMetrics()
        if settings.metrics_port is not None:
            metrics.serve(settings.metrics_port)
        worker = Worker(pool, asyncpg_dsn(url), catalog, storage, config, metrics)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, worker.stop)
        await worker.run()
    finally:
        await storage.aclose()  # the stores the worker opened, once its attempts are done
        await pool.close()
