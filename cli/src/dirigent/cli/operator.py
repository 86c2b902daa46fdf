"""``dirigent operator``: reconcile the four kinds into the engine until told to stop.

Settings come from the environment (``DIRIGENT_*`` for the engine, ``DIRIGENT_OPERATOR_*``
for the operator; see docs/operator.md); the flags below override the common ones. The
Kubernetes credentials are the pod's service account in a cluster, ``KUBECONFIG`` elsewhere.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from dirigent.engine import EngineSettings, EngineUnavailable, configure_logging
from dirigent.operator.app import run_operator
from dirigent.operator.settings import OperatorSettings


def command(
    namespace: Annotated[
        list[str] | None,
        typer.Option("--namespace", "-n", help="Watch only this namespace; repeat for several."),
    ] = None,
    admission: Annotated[
        bool | None,
        typer.Option("--admission/--no-admission", help="Serve the validating admission webhook."),
    ] = None,
    admission_port: Annotated[
        int | None, typer.Option(help="Port of the admission webhook (0 picks one).")
    ] = None,
) -> None:
    """Run the operator: Pipelines, Schedules, Webhooks and Connections into the engine."""
    overrides: dict[str, Any] = {}
    if namespace:
        overrides["namespaces"] = namespace
    if admission is not None:
        overrides["admission"] = admission
    if admission_port is not None:
        overrides["admission_port"] = admission_port
    try:
        engine_settings = EngineSettings()
        settings = OperatorSettings(**overrides)
        engine_settings.require_database_url()
    except (ValidationError, ValueError) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    configure_logging(engine_settings.log_format)
    try:
        asyncio.run(run_operator(engine_settings, settings))
    except EngineUnavailable as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        pass
