"""A Schedule's status after it fires: next and last fire, and its last run.

Firings happen in the scheduler, not in a reconcile, so nothing in Kubernetes would change
when a Schedule fires. The status feedback loop hands every transition of a run a Schedule
started (``triggered_by_kind == "schedule"``) here, and the Schedule's ``nextFire``,
``lastFired`` and ``lastRun`` are rewritten from the engine's view, never incremented, so a
repeated or reordered event converges on the same status.
"""

from __future__ import annotations

from typing import Any

from dirigent.engine.views import RunDetail

from .context import Context
from .kube import ObjectRef

__all__ = ["schedule_run"]


def _time(value: Any) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


async def schedule_run(ctx: Context, run: RunDetail) -> None:
    if run.triggered_by_kind != "schedule" or not run.triggered_by_ref:
        return
    view = await ctx.engine.schedule(run.namespace, run.triggered_by_ref)
    if view is None:
        return
    last_run = {
        "id": str(run.id),
        "state": run.status.capitalize(),
        "started": _time(run.started_at or run.created_at),
        "finished": _time(run.finished_at),
        "failedStep": run.failed_step,
    }
    status = {
        "nextFire": _time(view.next_fire_at),
        "lastFired": _time(view.last_fire_at),
        "lastRun": last_run,
    }
    ref = ObjectRef("Schedule", run.namespace, run.triggered_by_ref, "")
    await ctx.kube.patch_status(ref, status)
