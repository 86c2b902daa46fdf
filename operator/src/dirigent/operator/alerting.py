"""A failed alert delivery becomes a Warning Event (reason AlertFailed) on its Pipeline.

Alerts are delivered by workers, long after the run finished, so nothing in Kubernetes
changes when one gives up. The engine records a notification that gave up as an engine event
(entity ``notification``, status ``failed``, migration 0010); the status feedback loop,
which already follows those events from a durable cursor, hands each one here. The Event
names the rule, the run, the notifier and the last error, so ``kubectl describe pipeline``
shows that someone was not told.
"""

from __future__ import annotations

from collections.abc import Mapping

from dirigent.engine.shapes.views import EngineEvent

from .context import Context
from .kube import ObjectRef

__all__ = ["alert_failed"]


async def alert_failed(
    ctx: Context, pipelines: Mapping[tuple[str, str], ObjectRef], event: EngineEvent
) -> None:
    run = await ctx.engine.runs.get(event.namespace, event.run_id)
    if run is None:
        return
    notes = await ctx.engine.runs.notifications(event.namespace, event.run_id)
    note = next((n for n in notes if n.id == event.entity_id), None)
    ref = pipelines.get((event.namespace, run.pipeline))
    if note is None or ref is None:
        return
    message = (
        f"alert {note.rule} for run {run.id} was not delivered via {note.notifier} after "
        f"{note.attempts} attempt(s): {note.last_error or 'no error recorded'}"
    )
    await ctx.kube.event(ref, type_="Warning", reason="AlertFailed", message=message)
