"""``dirigent worker``: claim and run attempts until told to stop."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from dirigent.engine.logconfig import configure_logging
from dirigent.engine.runtime.process import run_worker
from dirigent.engine.settings import EngineSettings


def command(
    concurrency: Annotated[
        int | None, typer.Option(help="Attempts run at once (DIRIGENT_WORKER_CONCURRENCY).")
    ] = None,
    tag: Annotated[
        list[str] | None, typer.Option(help="A capability tag; repeat for several.")
    ] = None,
) -> None:
    """Run a worker: claims due attempts from the database and runs their blocks."""
    overrides: dict[str, object] = {}
    if concurrency is not None:
        overrides["worker_concurrency"] = concurrency
    if tag:
        overrides["worker_tags"] = tag
    settings = EngineSettings(**overrides)  # type: ignore[arg-type]
    configure_logging(settings.log_format)
    try:
        settings.require_database_url()
    except ValueError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    asyncio.run(run_worker(settings))
