"""The `dirigent` command: one entry point, one sub-command per process or task.

Sub-command modules are imported only when their command runs: the API and the operator
pull in FastAPI, kopf and SQLAlchemy, which a client command such as ``dirigent runs list``
never needs. ``dirigent --help`` (or an unknown command) loads them all to list them.
"""

from __future__ import annotations

import sys
from importlib import import_module
from importlib.metadata import version
from typing import Annotated, Any

import typer

# name → (module under dirigent.cli, attribute, a typer sub-app rather than a command)
_COMMANDS: dict[str, tuple[str, str, bool]] = {
    "crds": ("crds", "command", False),
    "validate": ("validate", "command", False),
    "migrate": ("migrate", "migrate", False),
    "worker": ("worker", "command", False),
    "run": ("run", "command", False),
    "blocks": ("blocks", "app", True),
    "operator": ("operator", "command", False),
    "scheduler": ("scheduler", "command", False),
    "dev": ("dev", "command", False),
    "api": ("api", "command", False),
    "openapi": ("openapi", "command", False),
    # Client commands: they talk to a server (dirigent dev or dirigent api) over the REST API.
    "runs": ("runs", "app", True),
    "pipelines": ("pipelines", "app", True),
    "apply": ("applying", "command", False),
    "backfill": ("backfill", "command", False),
}


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"dirigent {version('dirigent')}")
        raise typer.Exit()


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


def build(only: str | None = None) -> typer.Typer:
    """The command with every sub-command, or with ``only`` that one (imported lazily).

    ``only`` naming no sub-command (``--version``) builds the bare root: nothing imported.
    """
    app = typer.Typer(
        no_args_is_help=True, add_completion=False, help="dirigent: pipelines on Kubernetes."
    )
    app.callback()(_root)
    for name, (module, attribute, group) in _COMMANDS.items():
        if only is not None and name != only:
            continue
        target = getattr(import_module(f"dirigent.cli.{module}"), attribute)
        if group:
            app.add_typer(target, name=name)
        else:
            app.command(name)(target)
    return app


def __getattr__(name: str) -> Any:
    # ``app``: the whole command, for tests driving it with typer's CliRunner.
    if name == "app":
        return build()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    invoked = sys.argv[1] if len(sys.argv) > 1 else None
    known = invoked in _COMMANDS or invoked == "--version"
    build(invoked if known else None)()
