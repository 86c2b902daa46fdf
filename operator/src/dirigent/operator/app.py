"""Assembling and running the operator: engine, Lease, kopf, admission, feedback, metrics.

The order is the point: a process first waits to hold the Lease (a standby does nothing
else), then opens the engine and starts kopf (handlers, indexes, admission) beside the
feedback loop and the Lease renewal. Losing the Lease, or kopf stopping on SIGTERM, stops
everything; on a clean stop the Lease is released so a standby takes over at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket

import kopf

from dirigent.engine import Engine, EngineSettings

from .certificates import self_signed
from .context import Context, log
from .feedback import Feedback
from .kube import Kube, ObjectRef, api_client
from .leadership import Leadership
from .metrics import OperatorMetrics
from .registry import build_registry
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
    kube = Kube(api_client())
    identity = settings.identity or f"{socket.gethostname()}-{os.getpid()}"
    leadership = Leadership(kube, settings, identity)
    try:
        await leadership.acquire()
        metrics = OperatorMetrics()
        if engine_settings.metrics_port is not None:
            port = metrics.serve(engine_settings.metrics_port)
            log.info("metrics", port=port)
        async with Engine.open(engine_settings, pool_size=8) as engine:
            ctx = Context(engine, kube, settings, metrics)
            await _lead(ctx, leadership)
    finally:
        kube.close()


async def _lead(ctx: Context, leadership: Leadership) -> None:
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
        asyncio.create_task(feedback.run()),
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
