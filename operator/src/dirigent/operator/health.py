"""A Connection's ``Healthy`` condition: its kind's ``check()``, run every
``DIRIGENT_OPERATOR_HEALTH_CHECK_SECONDS`` by a kopf daemon per Connection.

Where the check runs: here, in the operator, through ``Engine.check_connection``. The check
needs the connection opened — its secret fields unsealed — and the operator is the process
that already holds ``DIRIGENT_SECRET_KEY`` (it seals those fields at apply, after reading
them from the Secrets it alone may read), so running the check here gives no process a key
or a Secret it did not have. Workers still open a connection only for the step that names it.

Invariants:
- Healthy=True (reason ``Reachable``) or False with the engine's reason (``Unreachable``,
  ``CheckTimedOut``, ``CheckFailed``, ``InvalidSettings``, ``Unopenable``) and the check's
  message; Unknown (``NoCheck``) when the kind is not installed in the operator;
  ``lastTransitionTime`` changes only when the status does (``conditions``);
- ``lastCheck`` (time, healthy, message) is rewritten on every check: it is what the
  ``Healthy`` printer column shows, and says when the operator last looked;
- a Connection the engine does not hold (not synced yet, or refused) is not checked: its
  Ready condition already says why; it is looked at again within ``RETRY_SECONDS``, so the
  first check follows the first sync closely instead of a whole period later;
- the loop outlives its own errors (an API hiccup, the database away): it logs, and checks
  again at the next period.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .conditions import condition, now, set_condition
from .context import Context, log
from .kube import ObjectRef

__all__ = ["connection_health", "keep_checking"]

RETRY_SECONDS = 2.0


async def connection_health(ctx: Context, body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The status to merge after one check, or None when there is nothing to check."""
    ref = ObjectRef.of(body)
    health = await ctx.engine.connections.check(
        ref.namespace, ref.name, within=ctx.settings.health_check_timeout
    )
    if health is None:
        return None
    generation = body["metadata"].get("generation")
    said = condition("Healthy", health.ok, health.reason, health.message, generation)
    conditions = (body.get("status") or {}).get("conditions")
    last = {"time": now(), "healthy": health.ok, "message": health.message}
    return {"conditions": set_condition(conditions, said), "lastCheck": last}


async def keep_checking(ctx: Context, body: Mapping[str, Any], stopped: Any) -> None:
    """The daemon's loop: check, write, wait (``stopped`` is kopf's DaemonStopped flag)."""
    ref = ObjectRef.of(body)
    every = ctx.settings.health_check_seconds
    while not stopped:
        status = None
        try:
            status = await connection_health(ctx, body)  # ``body`` is kopf's live view
            if status is not None:
                await ctx.kube.patch_status(ref, status)
        except Exception as exc:  # the next period tries again; the loop must not die
            log.warning("connection check failed", name=ref.name, error=str(exc))
            status = {}
        await stopped.wait(every if status is not None else min(RETRY_SECONDS, every))
