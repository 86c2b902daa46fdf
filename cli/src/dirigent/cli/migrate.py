"""`dirigent migrate`: bring the database schema to the version this release expects.

Runs as a Helm pre-install/pre-upgrade hook Job and by hand. Safe to run concurrently and
repeatedly: migrations take an advisory lock and a database already at head is left alone.
"""

from __future__ import annotations

import typer
from pydantic import ValidationError

from dirigent.engine.settings import EngineSettings
from dirigent.engine.store.database import head_revision, upgrade


def migrate(
    revision: str = typer.Option("head", help="Target revision (default: the latest)."),
) -> None:
    """Migrate the database at DIRIGENT_DATABASE_URL to the latest schema."""
    try:
        url = EngineSettings().database_url
    except ValidationError as error:
        typer.echo(f"error: invalid settings: {error}", err=True)
        raise typer.Exit(2) from None
    if not url:
        typer.echo("error: DIRIGENT_DATABASE_URL is not set", err=True)
        raise typer.Exit(2)
    target = head_revision() if revision == "head" else revision
    result = upgrade(url, revision)
    if result.changed:
        typer.echo(f"migrated: {result.before or '(empty database)'} -> {result.after}")
    else:
        typer.echo(f"already at {result.after} (target {target}); nothing to do")
