"""Status fed back from the engine: runs in flight and the last run, and a Warning per failure.

Runs live in PostgreSQL, not in etcd, so nothing in Kubernetes changes when a run starts or
fails. This loop follows the engine's transitions (``Engine.subscribe``) and, for each run
transition, rewrites its Pipeline's ``runsInFlight`` and ``lastRun`` from the engine's
summary; a run that fails also raises a Warning Event (reason RunFailed, the failed step and
its message) on the Pipeline, which ``kubectl describe`` shows; an alert that could not be
delivered raises one too (``alerting``); a run a Schedule or a Webhook started rewrites that
trigger's status: next and last fire, last firing, last delivery, last run (``trigger_status``).

Invariants:
- the subscription resumes from a durable cursor (kept by ``leadership`` in the Lease the
  active operator holds), so a restart neither misses a failure nor repeats one it handled;
- status is always recomputed from the engine's summary, never incremented: a repeated or
  reordered event converges on the same status;
- a slow resync rewrites every known Pipeline's summary, so a status lost to an API error
  (or written by nothing while the operator was down) is repaired within one period.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from dirigent.engine.shapes.views import EngineEvent, LastRun, PipelineSummary

from .alerting import alert_failed
from .context import Context, log
from .kube import ApiException, ObjectRef
from .trigger_status import trigger_run

__all__ = ["Feedback", "summary_status"]

_PipelineRefs = Callable[[], Mapping[tuple[str, str], ObjectRef]]


def _time(value: Any) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def _last_run(last: LastRun) -> dict[str, Any]:
    out = {
        "id": str(last.id),
        "state": last.status.capitalize(),
        "started": _time(last.started_at or last.created_at),
        "finished": _time(last.finished_at),
        "failedStep": last.failed_step,
    }
    return out


def summary_status(summary: PipelineSummary) -> dict[str, Any]:
    """The part of a Pipeline's status that comes from its runs."""
    status: dict[str, Any] = {"runsInFlight": summary.runs_in_flight}
    if summary.last_run is not None:
        status["lastRun"] = _last_run(summary.last_run)
    return status


class Feedback:
    """Follows engine events and keeps Pipeline status current; run it as one task."""

    def __init__(self, ctx: Context, pipelines: _PipelineRefs, cursor: str | None) -> None:
        self.ctx = ctx
        self.pipelines = pipelines
        self.cursor = cursor

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self._follow())
            tasks.create_task(self._resync())

    async def refresh(self, namespace: str, name: str) -> None:
        ref = self.pipelines().get((namespace, name))
        summary = await self.ctx.engine.pipelines.summary(namespace, name)
        if ref is None or summary is None:
            return
        await self.ctx.kube.patch_status(ref, summary_status(summary))

    async def _follow(self) -> None:
        async for event in self.ctx.engine.events.subscribe(cursor=self.cursor):
            try:
                if event.entity == "run":
                    await self._handle(event)
                elif event.entity == "notification" and event.status == "failed":
                    await alert_failed(self.ctx, self.pipelines(), event)
            except ApiException as exc:  # the resync repairs what this missed
                log.warning("status feedback failed", run=event.run_id, error=str(exc))
            self.cursor = event.cursor

    async def _handle(self, event: EngineEvent) -> None:
        run = await self.ctx.engine.runs.get(event.namespace, event.run_id)
        if run is None:
            return
        await self.refresh(event.namespace, run.pipeline)
        await trigger_run(self.ctx, run)
        ref = self.pipelines().get((event.namespace, run.pipeline))
        if event.status == "failed" and event.previous != "failed" and ref is not None:
            where = f"step {run.failed_step}" if run.failed_step else "the run"
            message = f"run {run.id} failed in {where}: {run.error_message or 'no message'}"
            await self.ctx.kube.event(ref, type_="Warning", reason="RunFailed", message=message)

    async def _resync(self) -> None:
        while True:
            await asyncio.sleep(self.ctx.settings.resync_seconds)
            for namespace, name in list(self.pipelines()):
                try:
                    await self.refresh(namespace, name)
                except ApiException as exc:
                    log.warning("status resync failed", pipeline=name, error=str(exc))
