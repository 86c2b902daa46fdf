"""`dirigent migrate`: bring the database schema to the version this release expects.

Runs as a Helm pre-install/pre-upgrade hook Job and by hand. Safe to run concurrently and
repeatedly: migrations take an advisory lock and a database already at head is left alone.
An unreachable database is one line and exit 1.
"""

from __future__ import annotations

import asyncio

import typer

from dirigent.cli import process
from dirigent.engine import Engine, MigrationFailed


def migrate(
    revision: str = typer.Option("head", help="Target revision (default: the latest)."),
    log_format: process.LogFormatOption = process.LogFormat.AUTO,
) -> None:
    """Migrate the database at DIRIGENT_DATABASE_URL to the latest schema."""
    settings = process.load_settings()
    process.configure_logs(settings, log_format, level="WARNING")
    url = settings.database_url
    if not url:
        process.fail("DIRIGENT_DATABASE_URL is not set", process.EXIT_USAGE)
    target = Engine.schema_head() if revision == "head" else revision
    try:
        result = asyncio.run(Engine.migrate(url, revision))
    except MigrationFailed as err:
        process.fail(f"cannot migrate the database: {err}")
    if result.changed:
        typer.echo(f"migrated: {result.before or '(empty database)'} -> {result.after}")
    else:
        typer.echo(f"already at {result.after} (target {target}); nothing to do")
