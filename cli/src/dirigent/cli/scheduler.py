"""``dirigent scheduler``: fire due schedules while this instance holds the leader lock.

Run one or several: a PostgreSQL advisory lock elects one leader, the others wait and take
over when it dies. ``dirigent api`` embeds the same scheduler unless told not to.
"""

from __future__ import annotations

import asyncio
import signal

import typer
from prometheus_client import start_http_server

from dirigent.engine import Engine, EngineUnavailable
from dirigent.engine.logconfig import configure_logging
from dirigent.engine.settings import EngineSettings


async def _run(settings: EngineSettings) -> None:
    async with Engine.open(settings, pool_size=8) as engine:
        scheduler = engine.scheduler()
        if settings.metrics_port is not None:
            start_http_server(settings.metrics_port, registry=scheduler.metrics.registry)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, scheduler.stop)
        await scheduler.run()


def command() -> None:
    """Run the scheduler: fires Schedules (cron, interval, one-time) as their slots fall due."""
    settings = EngineSettings()
    configure_logging(settings.log_format)
    try:
        settings.require_database_url()
        asyncio.run(_run(settings))
    except (ValueError, EngineUnavailable) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
