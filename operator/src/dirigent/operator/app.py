"""Assembling and running the operator: engine, Lease, kopf, admission, feedback, metrics.

The order is the point: a process first serves its port (metrics and probes: a standby is
alive and ready, and says it is a standby), then waits to hold the Lease (a standby does
nothing else), then opens the engine and starts kopf (handlers, indexes, admission) beside
the feedback loop and the Lease renewal. Losing the Lease, or kopf stopping on SIGTERM, stops
everything; on a clean stop the Lease is released so a standby takes over at once. The
feedback loop is supervised: whatever ends it is logged, counted and the loop restarted with
backoff, and readiness is false while it is down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Awaitable, Callable

import kopf

from dirigent.engine import Engine, EngineSettings

from .certificates import self_signed
from .context import Context, log
from .feedback import Feedback
from .kube import Kube, ObjectRef, api_client
from .leadership import Leadership
from .metrics import OperatorMetrics
from .registry import build_registry
from .serving import Health, serve_health
from .settings import OperatorSettings

__all__ = ["kopf_settings", "run_operator"]

FINALIZER = "dirigent.dev/finalizer"


def kopf_settings(settings: OperatorSettings) -> kopf.OperatorSettings:
    s = kopf.OperatorSettings()
    s.persistence.finalizer = FINALIZER
    # kopf's own "handler succeeded" Events would drown ours; keep only its errors.
    s.posting.level = logging.ERROR
    s.batching.batch_window = 0.05
    s.watching.server_timeout = 300
    if settings.admission:
        host = settings.admission_host or settings.admission_addr
        cert, key = self_signed(settings.admission_cert_dir, [host, settings.admission_addr])
        s.admission.server = kopf.WebhookServer(
            addr=settings.admission_addr,
            port=settings.admission_port,
            host=host,
            certfile=str(cert),
            pkeyfile=str(key),
        )
        s.admission.managed = settings.webhook_configuration
    return s


async def run_operator(engine_settings: EngineSettings, settings: OperatorSettings) -> None:
    """Run until SIGTERM/SIGINT or until the Lease is lost."""
    kube = Kube(api_client(), timeout=settings.kube_timeout_seconds)
    identity = settings.identity or f"{socket.gethostname()}-{os.getpid()}"
    leadership = Leadership(kube, settings, identity)
    metrics = OperatorMetrics()
    health = Health()
    runner = None
    try:
        if engine_settings.metrics_port is not None:
            runner, port = await serve_health(health, metrics, engine_settings.metrics_port)
            log.info("serving metrics and probes", port=port)
        await leadership.acquire()
        health.leading = True
        async with Engine.open(engine_settings, pool_size=8) as engine:
            ctx = Context(engine, kube, settings, metrics)
            await _lead(ctx, leadership, health)
    finally:
        health.leading = False
        if runner is not None:
            await runner.cleanup()
        kube.close()


async def supervised(
    loop: Callable[[], Awaitable[None]],
    health: Health,
    metrics: OperatorMetrics,
    *,
    backoff: tuple[float, float] = (1.0, 30.0),
) -> None:
    """Run ``loop`` forever: whatever ends it (a transport error, the database away) is
    logged with its traceback and counted, readiness says so, and it starts again."""
    delay = backoff[0]
    while True:
        try:
            health.feedback_down = None
            await loop()
            why = "the loop returned"
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            why = f"{type(exc).__name__}: {exc}"
            log.exception("status feedback stopped; restarting", delay=delay)
            metrics.feedback_restarts.labels(error=type(exc).__name__).inc()
        health.feedback_down = why
        await asyncio.sleep(delay)
        delay = min(delay * 2, backoff[1])


async def _lead(ctx: Context, leadership: Leadership, health: Health) -> None:
    pipelines: dict[tuple[str, str], ObjectRef] = {}
    feedback = Feedback(ctx, lambda: pipelines, leadership.cursor)
    leadership.cursor_source = lambda: feedback.cursor
    stop = asyncio.Event()
    namespaces = ctx.settings.namespaces
    operator = asyncio.create_task(
        kopf.operator(
            registry=build_registry(ctx, pipelines),
            settings=kopf_settings(ctx.settings),
            standalone=True,
            clusterwide=not namespaces,
            namespaces=namespaces,
            stop_flag=stop,
        )
    )
    helpers = [
        asyncio.create_task(leadership.keep()),
        asyncio.create_task(supervised(feedback.run, health, ctx.metrics)),
        asyncio.create_task(_stop_when_lost(leadership, stop)),
    ]
    try:
        await operator
    finally:
        stop.set()
        for task in helpers:
            task.cancel()
        for task in helpers:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if not leadership.lost.is_set():
            await leadership.release()
    if leadership.lost.is_set():
        raise SystemExit("lost the operator Lease to another instance")


async def _stop_when_lost(leadership: Leadership, stop: asyncio.Event) -> None:
    await leadership.lost.wait()
    stop.set()
