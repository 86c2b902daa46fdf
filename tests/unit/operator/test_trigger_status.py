"""Schedule and Webhook status from the engine's views: the last firing (failed ones with
their message and a False ``Firing`` condition) and the last delivery."""

from __future__ import annotations

import datetime as dt
from typing import Any

from dirigent.engine.shapes.views import DeliveryView, FiringView, ScheduleView, WebhookView
from dirigent.operator.trigger_status import delivery_status, firing_status

T0 = dt.datetime(2026, 12, 3, 6, 0, tzinfo=dt.UTC)
VIEW = ScheduleView(
    namespace="team",
    name="nightly",
    pipeline="load",
    paused=False,
    next_fire_at=T0 + dt.timedelta(hours=1),
    last_fire_at=T0,
    last_run_id=7,
    last_error=None,
)


def firing(result: str, run_id: int | None, message: str | None = None) -> FiringView:
    return FiringView(
        id=1,
        scheduled_for=T0,
        fired_at=T0 + dt.timedelta(seconds=2),
        result=result,
        misfire=False,
        run_id=run_id,
        message=message,
    )


def test_a_failed_firing_shows_its_message_and_a_false_condition() -> None:
    why = "pipeline 'load' allows one run at a time (concurrency: Skip) [run.concurrency.skipped]"
    status = firing_status(VIEW, firing("failed", None, why), None, {"status": {}})
    assert status["lastFiring"] == {
        "time": "2026-12-03T06:00:02Z",
        "scheduledFor": "2026-12-03T06:00:00Z",
        "result": "Failed",
        "runId": None,
        "misfire": False,
        "message": why,
    }
    [cond] = status["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("Firing", "False", "FiringFailed")
    assert why in cond["message"]
    assert status["nextFire"] == "2026-12-03T07:00:00Z"
    assert status["lastFired"] == "2026-12-03T06:00:00Z"


def test_a_firing_that_started_a_run_keeps_ready_and_moves_the_transition_once() -> None:
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-01T00:00:00Z"}
    failing = {
        "type": "Firing",
        "status": "False",
        "reason": "FiringFailed",
        "lastTransitionTime": "2026-12-02T00:00:00Z",
    }
    body: dict[str, Any] = {"status": {"conditions": [ready, failing]}}
    status = firing_status(VIEW, firing("fired", 8), None, body)
    assert status["lastFiring"]["result"] == "Fired" and status["lastFiring"]["runId"] == "8"
    kept, fired = status["conditions"]
    assert kept == ready
    assert (fired["status"], fired["reason"]) == ("True", "Fired")
    assert fired["lastTransitionTime"] != "2026-12-02T00:00:00Z"
    # the same outcome again keeps the transition time
    again = firing_status(VIEW, firing("fired", 9), None, {"status": status})
    assert again["conditions"][1]["lastTransitionTime"] == fired["lastTransitionTime"]


def test_a_schedule_that_never_fired_has_no_firing_condition() -> None:
    status = firing_status(VIEW, None, None, {})
    assert "lastFiring" not in status and "conditions" not in status


def test_a_webhook_shows_its_last_delivery_refusals_included() -> None:
    view = WebhookView(
        namespace="team",
        name="inbound",
        pipeline="load",
        enabled=True,
        path="/hooks/abcd…",
        last_delivery_at=T0,
        last_delivery_result="refused",
    )
    refused = DeliveryView(
        id=3,
        received_at=T0,
        result="refused",
        reason="webhook.signature.invalid",
        status_code=401,
        run_id=None,
        message="the signature does not match",
    )
    assert delivery_status(view, refused) == {
        "lastDelivery": {
            "time": "2026-12-03T06:00:00Z",
            "outcome": "Refused",
            "statusCode": 401,
            "runId": None,
            "reason": "webhook.signature.invalid",
            "message": "the signature does not match",
        }
    }
    accepted = refused.model_copy(
        update={"result": "accepted", "reason": None, "status_code": 202, "run_id": 12}
    )
    last = delivery_status(view, accepted)["lastDelivery"]
    assert (last["outcome"], last["runId"]) == ("Accepted", "12")
    assert delivery_status(view, None) == {}


def test_a_status_the_server_already_holds_is_not_patched_again() -> None:
    from dirigent.operator.trigger_status import _changed

    wanted = firing_status(VIEW, firing("failed", None, "refused"), None, {})
    # what the API server keeps after the merge patch: None values are removed keys
    live = {
        k: ({kk: vv for kk, vv in v.items() if vv is not None} if isinstance(v, dict) else v)
        for k, v in wanted.items()
    }
    assert _changed({"status": live}, wanted) == {}
    assert set(_changed({"status": {}}, wanted)) == set(wanted)
