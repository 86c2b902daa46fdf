"""``dirigent api``: serve the REST API (its documents: ``dirigent openapi``, cli/openapi.py).

Started through ``process`` like every entry point (settings from the environment, JSON logs
off a terminal, SIGTERM and SIGINT stop it gracefully, an unreachable or unmigrated database
is one line). The API authenticates with one static token (``--auth static``, the token read
from ``DIRIGENT_API_TOKEN``: never a command-line argument, which ``ps`` would show) or with
the cluster (``--auth cluster``: TokenReview and SubjectAccessReview, in-cluster credentials
or ``--kubeconfig``). Metrics are served on their own port (``DIRIGENT_METRICS_PORT``). The
scheduler (``Engine.scheduler``) runs embedded unless ``--no-scheduler`` (then run
``dirigent scheduler`` on its own); it fires only while it holds the scheduler lock, so
several API replicas never double-fire.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from dirigent.api.app import create_app
from dirigent.api.auth import Auth, ClusterAuth, KubeAccess, StaticToken, StreamBudget
from dirigent.api.metrics import ApiMetrics
from dirigent.api.server import ApiServer
from dirigent.api.streams import StreamSettings
from dirigent.cli import process
from dirigent.engine import Engine, EngineSettings


@dataclass(frozen=True)
class _Options:
    auth: Auth
    host: str
    port: int
    streams: StreamSettings
    budget: StreamBudget
    scheduler: bool


def command(
    host: Annotated[
        str, typer.Option(envvar="DIRIGENT_API_HOST", help="Address to listen on.")
    ] = "0.0.0.0",
    port: Annotated[
        int, typer.Option(envvar="DIRIGENT_API_PORT", help="Port to listen on.")
    ] = 8080,
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
    log_format: process.LogFormatOption = process.LogFormat.AUTO,
) -> None:
    """Serve the REST API (and the embedded scheduler, unless --no-scheduler)."""
    settings = process.load_settings()
    process.configure_logs(settings, log_format)
    if not settings.database_url:
        process.fail("DIRIGENT_DATABASE_URL is not set", process.EXIT_USAGE)
    try:
        checker = _auth(auth, kubeconfig, tuple(settings.api_token_audiences))
    except (ValueError, KeyError, OSError) as err:
        process.fail(str(err), process.EXIT_USAGE)
    options = _Options(
        checker,
        host,
        port,
        StreamSettings(lifetime=stream_lifetime),
        StreamBudget(streams_per_principal),
        scheduler=not no_scheduler,
    )

    async def service(settings: EngineSettings, stop: asyncio.Event) -> None:
        await _serve(settings, stop, options)

    process.serve(service, settings)


def _auth(mode: str, kubeconfig: Path | None, audiences: tuple[str, ...]) -> Auth:
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
        return ClusterAuth(access, audiences=audiences)
    raise ValueError(f"--auth must be static or cluster, not {mode!r}")


async def _serve(settings: EngineSettings, stop: asyncio.Event, options: _Options) -> None:
    metrics = ApiMetrics()
    if settings.metrics_port is not None:
        metrics.serve(settings.metrics_port)
    # One registry for the process: the embedded scheduler's and the intake's metrics too.
    async with Engine.open(settings, registry=metrics.registry) as engine:
        app = create_app(
            engine,
            auth=options.auth,
            metrics=metrics,
            streams=options.budget,
            stream_settings=options.streams,
        )
        server = ApiServer(app, host=options.host, port=options.port)
        clock = engine.triggers.scheduler() if options.scheduler else None
        ticking = asyncio.create_task(clock.run()) if clock is not None else None
        try:
            await server.start()
            await stop.wait()
        finally:
            await server.stop()
            if clock is not None and ticking is not None:
                clock.stop()
                await ticking
            if isinstance(options.auth, ClusterAuth):
                await options.auth.aclose()
