"""``dirigent api``: serve the REST API, and ``dirigent openapi``: its document, or its drift.

The API authenticates with one static token (``--auth static``, the token read from
``DIRIGENT_API_TOKEN``: never a command-line argument, which ``ps`` would show) or with the
cluster (``--auth cluster``: TokenReview and SubjectAccessReview, in-cluster credentials or
``--kubeconfig``). Metrics are served on their own port (``DIRIGENT_METRICS_PORT``). The
scheduler (``Engine.scheduler``) runs embedded unless ``--no-scheduler`` (then run
``dirigent scheduler`` on its own); it fires only while it holds the scheduler lock, so
several API replicas never double-fire.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import os
from pathlib import Path
from typing import Annotated

import typer

from dirigent.api.app import create_app
from dirigent.api.auth import Auth, ClusterAuth, KubeAccess, StaticToken, StreamBudget
from dirigent.api.metrics import ApiMetrics
from dirigent.api.openapi import render
from dirigent.api.server import ApiServer
from dirigent.api.streams import StreamSettings
from dirigent.engine import Engine, EngineSettings, EngineUnavailable
from dirigent.engine.logconfig import configure_logging

OPENAPI_PATH = Path("docs/openapi.json")


def command(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "0.0.0.0",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    auth: Annotated[
        str, typer.Option(help="static (DIRIGENT_API_TOKEN) or cluster (TokenReview + SAR).")
    ] = "cluster",
    kubeconfig: Annotated[
        Path | None, typer.Option(help="For --auth cluster outside a pod.")
    ] = None,
    no_scheduler: Annotated[bool, typer.Option(help="Do not embed the scheduler.")] = False,
    stream_lifetime: Annotated[
        float, typer.Option(help="Seconds before an open stream ends with `expired`.")
    ] = 3600.0,
    streams_per_principal: Annotated[
        int, typer.Option(min=1, help="Event and log streams one principal may hold open.")
    ] = 8,
) -> None:
    """Serve the REST API (and the embedded scheduler, when there is one)."""
    settings = EngineSettings()
    configure_logging(settings.log_format)
    try:
        settings.require_database_url()
        checker = _auth(auth, kubeconfig)
    except (ValueError, KeyError, OSError) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    streams = StreamSettings(lifetime=stream_lifetime)
    budget = StreamBudget(streams_per_principal)
    try:
        asyncio.run(
            _serve(settings, checker, host, port, streams, budget, scheduler=not no_scheduler)
        )
    except EngineUnavailable as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(1) from None


def _auth(mode: str, kubeconfig: Path | None) -> Auth:
    if mode == "static":
        token = os.environ.get("DIRIGENT_API_TOKEN", "")
        if not token:
            raise ValueError(
                "--auth static reads its token from DIRIGENT_API_TOKEN, which is unset"
            )
        return StaticToken(token)
    if mode == "cluster":
        access = (
            KubeAccess.from_kubeconfig(str(kubeconfig)) if kubeconfig else KubeAccess.in_cluster()
        )
        return ClusterAuth(access)
    raise ValueError(f"--auth must be static or cluster, not {mode!r}")


async def _serve(
    settings: EngineSettings,
    auth: Auth,
    host: str,
    port: int,
    streams: StreamSettings,
    budget: StreamBudget,
    *,
    scheduler: bool,
) -> None:
    metrics = ApiMetrics()
    if settings.metrics_port is not None:
        metrics.serve(settings.metrics_port)
    async with Engine.open(settings) as engine:
        app = create_app(
            engine, auth=auth, metrics=metrics, streams=budget, stream_settings=streams
        )
        server = ApiServer(app, host=host, port=port)
        clock = engine.scheduler() if scheduler else None
        clock_task = asyncio.create_task(clock.run()) if clock is not None else None
        try:
            await server.start()
            await server.wait()
        finally:
            if clock is not None and clock_task is not None:  # stop the clock, then wait
                clock.stop()
                await clock_task
            if isinstance(auth, ClusterAuth):
                await auth.aclose()


def openapi(
    check: Annotated[bool, typer.Option(help="Fail when the committed document is stale.")] = False,
    out: Annotated[Path, typer.Option(help="Where the document lives.")] = OPENAPI_PATH,
) -> None:
    """Write docs/openapi.json from the code, or with --check fail when it has drifted."""
    wanted = render()
    have = out.read_text(encoding="utf-8") if out.exists() else ""
    if check:
        if have != wanted:
            diff = difflib.unified_diff(
                have.splitlines(keepends=True),
                wanted.splitlines(keepends=True),
                fromfile=f"{out} (committed)",
                tofile=f"{out} (generated)",
                n=1,
            )
            typer.echo("".join(list(diff)[:200]), err=True)
            typer.echo(f"{out} is stale: run `dirigent openapi`", err=True)
            raise typer.Exit(1)
        return
    with contextlib.suppress(FileExistsError):
        out.parent.mkdir(parents=True, exist_ok=True)
    if have != wanted:
        out.write_text(wanted, encoding="utf-8")
        typer.echo(f"wrote {out}")
