"""What every handler shares: the engine door, the Kubernetes client, settings and metrics.

Why an object and not module globals: kopf handlers are registered by ``registry.build``
as closures over one ``Context``, so two operators in one process (tests) never share
state, and a handler's dependencies are visible in its signature's first argument.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import structlog

from dirigent.engine import Engine

from .kube import Kube, ObjectRef
from .metrics import OperatorMetrics
from .settings import OperatorSettings

__all__ = ["Context", "Reconciled"]

log = structlog.get_logger("dirigent.operator")


@dataclass(frozen=True)
class Reconciled:
    """What a reconcile decided: the status to merge, and whether the resource is Ready."""

    status: dict[str, Any]
    ready: bool
    result: str  # ok | invalid | error: the metrics label
    annotations: Mapping[str, str | None] | None = None


@dataclass
class Context:
    engine: Engine
    kube: Kube
    settings: OperatorSettings
    metrics: OperatorMetrics
    _locks: dict[tuple[str, str, str], asyncio.Lock] = field(default_factory=dict, repr=False)

    @asynccontextmanager
    async def serialized(self, ref: ObjectRef) -> AsyncIterator[None]:
        """One reconcile-and-write of an object at a time in this process.

        A trigger's own handler and its Pipeline's re-sync of dependents may reconcile it at
        once; without this, an outcome reached before the Pipeline was active could be
        written after the re-sync's, leaving the trigger PipelineNotFound for good.
        """
        lock = self._locks.setdefault((ref.kind, ref.namespace, ref.name), asyncio.Lock())
        async with lock:
            yield

    @asynccontextmanager
    async def measured(self, kind: str) -> AsyncIterator[None]:
        began = time.monotonic()
        try:
            yield
        finally:
            self.metrics.duration.labels(kind=kind).observe(time.monotonic() - began)

    def record(self, ref: ObjectRef, outcome: Reconciled) -> None:
        self.metrics.reconciles.labels(kind=ref.kind, result=outcome.result).inc()
        self.metrics.observe(ref.kind, ref.namespace, ref.name, outcome.ready)

    async def write(self, ref: ObjectRef, outcome: Reconciled) -> None:
        """Write an outcome reached outside a kopf handler (a re-sync, a dependent)."""
        self.record(ref, outcome)
        await self.kube.patch_status(ref, outcome.status)
        if outcome.annotations:
            await self.kube.patch_annotations(ref, outcome.annotations)
