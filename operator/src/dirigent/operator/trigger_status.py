"""Schedule and Webhook status from the engine: next and last fire, the last firing and the
last delivery, and the run they started.

Firings happen in the scheduler and deliveries in ``dirigent api``, not in a reconcile, so
nothing in Kubernetes changes when a Schedule fires or a Webhook is called. Two paths write
it, both through ``refresh_trigger``:

- the status feedback loop, for every transition of a run a Schedule or a Webhook started
  (``triggered_by_kind``): a firing or a delivery that starts a run shows at once;
- a kopf timer per Schedule and Webhook every ``DIRIGENT_OPERATOR_RESYNC_SECONDS``: a
  firing that failed (a pin that no longer validates, a concurrency refusal) or a refused
  delivery starts no run and so raises no run event, and is shown within one period.

Invariants:
- status is rewritten from the engine's view (the schedule or webhook row, its newest firing
  or delivery, the last run), never incremented: a repeated or reordered event converges;
- only what differs from the live object is patched, so a timer tick that finds nothing new
  writes nothing;
- a Schedule carries the condition ``Firing``: True (reason ``Fired``) when its last firing
  started a run, False (reason ``FiringFailed``, the engine's message) when it was refused;
  its ``lastTransitionTime`` moves only when that changes (``conditions``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dirigent.engine.shapes.views import (
    DeliveryView,
    FiringView,
    RunDetail,
    ScheduleView,
    WebhookView,
)

from .conditions import condition, set_condition
from .context import Context
from .kube import ObjectRef

__all__ = ["delivery_status", "firing_status", "refresh_trigger", "run_status", "trigger_run"]

TRIGGER_KINDS = {"schedule": "Schedule", "webhook": "Webhook"}


def _time(value: Any) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def run_status(run: RunDetail) -> dict[str, Any]:
    return {
        "id": str(run.id),
        "state": run.status.capitalize(),
        "started": _time(run.started_at or run.created_at),
        "finished": _time(run.finished_at),
        "failedStep": run.failed_step,
    }


def firing_status(
    view: ScheduleView,
    firing: FiringView | None,
    run: RunDetail | None,
    body: Mapping[str, Any],
) -> dict[str, Any]:
    """A Schedule's status from the engine: what ``body`` should carry now."""
    status: dict[str, Any] = {
        "nextFire": _time(view.next_fire_at),
        "lastFired": _time(view.last_fire_at),
    }
    if run is not None:
        status["lastRun"] = run_status(run)
    if firing is None:
        return status
    ok = firing.result == "fired"
    status["lastFiring"] = {
        "time": _time(firing.fired_at),
        "scheduledFor": _time(firing.scheduled_for),
        "result": "Fired" if ok else "Failed",
        "runId": str(firing.run_id) if firing.run_id is not None else None,
        "misfire": firing.misfire,
        "message": firing.message,
    }
    if ok:
        said = condition("Firing", True, "Fired", f"the last firing started run {firing.run_id}")
    else:
        why = firing.message or "no message recorded"
        said = condition("Firing", False, "FiringFailed", f"the last firing was refused: {why}")
    conditions = (body.get("status") or {}).get("conditions")
    status["conditions"] = set_condition(conditions, said)
    return status


def delivery_status(view: WebhookView, delivery: DeliveryView | None) -> dict[str, Any]:
    """A Webhook's last delivery (time, outcome, run id), refusals included."""
    if delivery is None:
        return {}
    return {
        "lastDelivery": {
            "time": _time(delivery.received_at),
            "outcome": delivery.result.capitalize(),
            "statusCode": delivery.status_code,
            "runId": str(delivery.run_id) if delivery.run_id is not None else None,
            "reason": delivery.reason,
            "message": delivery.message,
        }
    }


def _compact(value: Any) -> Any:
    """A value as the API server keeps it: a merge patch's None removes a key, never stores it."""
    if isinstance(value, Mapping):
        return {k: _compact(v) for k, v in value.items() if v is not None}
    return value


def _changed(body: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
    live = body.get("status") or {}
    return {k: v for k, v in status.items() if _compact(live.get(k)) != _compact(v)}


async def _wanted(
    ctx: Context, kind: str, ns: str, name: str, body: Mapping[str, Any]
) -> dict[str, Any] | None:
    if kind == "Schedule":
        view = await ctx.engine.triggers.schedule(ns, name)
        if view is None:
            return None
        firings = await ctx.engine.triggers.firings(ns, name, limit=1)
        run = await ctx.engine.runs.get(ns, view.last_run_id) if view.last_run_id else None
        return firing_status(view, firings[0] if firings else None, run, body)
    hook = await ctx.engine.triggers.webhook(ns, name)
    if hook is None:
        return None
    deliveries = await ctx.engine.triggers.deliveries(ns, name, limit=1)
    return delivery_status(hook, deliveries[0] if deliveries else None)


async def refresh_trigger(
    ctx: Context, kind: str, namespace: str, name: str, body: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Patch what the engine says of one Schedule or Webhook and its live status lack.

    ``body`` is the live object when the caller has it (a kopf timer); else it is read.
    Returns what was patched (empty: nothing had changed, or the object or row is gone).
    """
    if body is None:
        body = await ctx.kube.get_object(kind, namespace, name)
        if body is None:
            return {}
    wanted = await _wanted(ctx, kind, namespace, name, body)
    patch = _changed(body, wanted or {})
    if patch:
        await ctx.kube.patch_status(ObjectRef(kind, namespace, name, ""), patch)
    return patch


async def trigger_run(ctx: Context, run: RunDetail) -> None:
    """The feedback loop's hook: a run a Schedule or Webhook started refreshes that trigger."""
    kind = TRIGGER_KINDS.get(run.triggered_by_kind or "")
    if kind is None or not run.triggered_by_ref:
        return
    await refresh_trigger(ctx, kind, run.namespace, run.triggered_by_ref)
