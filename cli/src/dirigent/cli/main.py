"""The `dirigent` command: one entry point, one sub-command per process or task."""

from __future__ import annotations

from importlib.metadata import version
from typing import Annotated

import typer

from dirigent.cli import (
    api,
    applying,
    backfill,
    blocks,
    crds,
    dev,
    migrate,
    operator,
    pipelines,
    run,
    runs,
    scheduler,
    validate,
    worker,
)

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="dirigent: pipelines on Kubernetes."
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"dirigent {version('dirigent')}")
        raise typer.Exit()


@app.callback()
def _root(
    _version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    """dirigent: a Kubernetes-native pipeline orchestrator."""


app.command("crds")(crds.command)
app.command("validate")(validate.command)
app.command("migrate")(migrate.migrate)
app.command("worker")(worker.command)
app.command("run")(run.command)
app.add_typer(blocks.app, name="blocks")
app.command("operator")(operator.command)
app.command("scheduler")(scheduler.command)
app.command("dev")(dev.command)
app.command("api")(api.command)
app.command("openapi")(api.openapi)
# Client commands: they talk to a server (dirigent dev or dirigent api) over the REST API.
app.add_typer(runs.app, name="runs")
app.add_typer(pipelines.app, name="pipelines")
app.command("apply")(applying.command)
app.command("backfill")(backfill.command)


def main() -> None:
    app()
