"""``dirigent scheduler``: fire due schedules while this instance holds the leader lock.

Run one or several: a PostgreSQL advisory lock elects one leader, the others wait and take
over when it dies. ``dirigent api`` and ``dirigent dev`` embed the same scheduler. Started
through ``process`` like every entry point: settings from the environment, JSON logs off a
terminal, SIGTERM stops it, an unreachable or unmigrated database is one line.
"""

from __future__ import annotations

import asyncio

from prometheus_client import start_http_server

from dirigent.cli import process
from dirigent.engine import Engine, EngineSettings


async def _run(settings: EngineSettings, stop: asyncio.Event) -> None:
    async with Engine.open(settings, pool_size=8) as engine:
        scheduler = engine.triggers.scheduler()
        if settings.metrics_port is not None:
            start_http_server(settings.metrics_port, registry=scheduler.metrics.registry)
        running = asyncio.create_task(scheduler.run())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
        scheduler.stop()
        stopping.cancel()
        await running


def command(log_format: process.LogFormatOption = process.LogFormat.AUTO) -> None:
    """Run the scheduler: fires Schedules (cron, interval, one-time) as their slots fall due."""
    settings = process.load_settings()
    process.configure_logs(settings, log_format)
    if not settings.database_url:
        process.fail("DIRIGENT_DATABASE_URL is not set", process.EXIT_USAGE)
    process.serve(_run, settings)
