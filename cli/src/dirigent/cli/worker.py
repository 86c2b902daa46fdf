"""``dirigent worker``: claim and run attempts until told to stop.

A Deployment of N replicas runs this. It reaches the engine through ``Engine.open`` (so an
unmigrated database is refused with one line before anything is claimed), serves its own
``/metrics`` port, and on SIGTERM stops claiming, finishes what it holds briefly and hands
back the rest.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from dirigent.cli import process
from dirigent.engine import Engine, EngineSettings


async def _work(settings: EngineSettings, stop: asyncio.Event) -> None:
    async with Engine.open(settings) as engine:
        worker = engine.workers.build()
        if settings.metrics_port is not None:
            worker.metrics.serve(settings.metrics_port)
        task = asyncio.create_task(worker.run())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
        worker.stop()
        stopping.cancel()
        await task


def command(
    concurrency: Annotated[
        int | None, typer.Option(help="Attempts run at once (DIRIGENT_WORKER_CONCURRENCY).")
    ] = None,
    tag: Annotated[
        list[str] | None, typer.Option(help="A capability tag; repeat for several.")
    ] = None,
    log_format: process.LogFormatOption = process.LogFormat.AUTO,
) -> None:
    """Run a worker: claims due attempts from the database and runs their blocks."""
    settings = process.load_settings(worker_concurrency=concurrency, worker_tags=tag or None)
    process.configure_logs(settings, log_format)
    if not settings.database_url:
        process.fail("DIRIGENT_DATABASE_URL is not set", process.EXIT_USAGE)
    process.serve(_work, settings)
