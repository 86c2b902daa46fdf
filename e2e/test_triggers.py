"""Schedules and Webhooks as `kubectl apply` people use them: resources that start runs.

Given the session's operator and worker (``system``) and a real ``dirigent api`` process on
the same database (it embeds the scheduler and serves ``/hooks/{token}``): a Schedule
resource fires its pipeline and the run finishes; a Webhook's token, read from the Secret the
operator minted, starts a run through a POST on loopback, and a wrong token is refused with
a Problem and starts nothing. Runs are read back through the engine's door.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from dirigent.engine import RunFilter
from e2e.engine import EngineClient
from e2e.gwt import Given, Then
from e2e.harness import processes
from e2e.harness.processes import Process, wait_until
from e2e.harness.system import DIRIGENT
from e2e.kubectl import Kubectl

pytestmark = pytest.mark.e2e

API = "dirigent.dev/v1alpha1"
API_TOKEN = "e2e-triggers-static-token"


def pipeline(name: str, **spec: Any) -> dict[str, Any]:
    steps = {"say": {"block": "core.echo", "config": {"value": "${params.word}"}}}
    schema = {"type": "object", "properties": {"word": {"type": "string", "default": "tick"}}}
    body = {"params": schema, "steps": steps, **spec}
    return {"apiVersion": API, "kind": "Pipeline", "metadata": {"name": name}, "spec": body}


def trigger(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}


def ready(then: Then, timeout: float = 30) -> Then:
    return then.condition("Ready", "True", timeout=timeout)


@pytest.fixture(scope="module")
def api(system: Any) -> Iterator[str]:
    """``dirigent api --auth static`` on the system's database, with its embedded scheduler."""
    port = processes.free_port()
    command = [DIRIGENT, "api", "--auth", "static", "--host", "127.0.0.1", "--port", str(port)]
    proc: Process = processes.start(
        "api-triggers",
        command,
        system.log_dir,
        tie_to_parent=True,
        env=system.env(DIRIGENT_API_TOKEN=API_TOKEN, DIRIGENT_SCHEDULER_TICK="0.2"),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(
            processes.http_ok(f"{url}/health/ready"), what="dirigent api", timeout=60, process=proc
        )
        yield url
    finally:
        proc.stop()


def runs_of(engine: EngineClient, namespace: str, name: str, kind: str | None = None) -> list[Any]:
    where = RunFilter(pipeline=name, triggered_by_kind=kind)
    page = engine.call(lambda e: e.runs.page(namespace, where))
    return list(page.items)


def finished(engine: EngineClient, namespace: str, run_id: int, timeout: float = 60) -> Any:
    seen: list[Any] = []

    def done() -> bool:
        seen[:] = [engine.run(namespace, run_id)]
        return seen[0] is not None and seen[0].status in {"succeeded", "failed", "cancelled"}

    wait_until(done, what=f"run {run_id} finished", timeout=timeout)
    return seen[0]


def test_a_schedule_resource_fires_its_pipeline(
    operator: Any, api: str, given: Given, engine_client: EngineClient, namespace: str
) -> None:
    # Given a Pipeline and a one-second interval Schedule on it
    ready(given.objects(pipeline("ticking")).when.applied().then)
    schedule = trigger("Schedule", "every-second", pipeline="ticking", interval="1s")
    schedule["spec"]["params"] = {"word": "scheduled"}
    then = ready(given.objects(schedule).when.applied().then)
    assert then.get()["status"].get("nextFire"), then.get()["status"]

    # Then the scheduler inside `dirigent api` fires it, and the worker runs it to success
    fired: list[Any] = []

    def has_run() -> bool:
        fired[:] = runs_of(engine_client, namespace, "ticking", "schedule")
        return bool(fired)

    wait_until(has_run, what="a run of ticking started by its Schedule", timeout=60)
    run = fired[-1]  # the oldest of those listed (newest first)
    assert run.triggered_by_ref is not None and "every-second" in run.triggered_by_ref
    assert run.window_start is not None and run.window_end is not None
    assert (run.window_end - run.window_start).total_seconds() == 1
    done = finished(engine_client, namespace, run.id)
    assert done.status == "succeeded", done
    # And the engine's schedule row records the firing it made
    view = engine_client.call(lambda e: e.triggers.schedule(namespace, "every-second"))
    assert view is not None and view.last_run_id is not None
    # And the Schedule resource's status shows its last fire and the run it started
    then.field("status.lastRun.state", equals="Succeeded", timeout=30)
    status = then.get()["status"]
    assert status["lastFired"] and status["nextFire"] > status["lastFired"], status
    assert int(status["lastRun"]["id"]) in {
        r.id for r in runs_of(engine_client, namespace, "ticking")
    }


def test_a_refused_firing_shows_on_the_schedule(
    operator: Any, api: str, given: Given, engine_client: EngineClient, namespace: str
) -> None:
    # Given a Pipeline that allows one run at a time, and whose run takes a while
    steps = {"nap": {"block": "core.sleep", "config": {"seconds": 30}}}
    body = {"concurrency": "Skip", "steps": steps}
    single = {"apiVersion": API, "kind": "Pipeline", "metadata": {"name": "single"}, "spec": body}
    ready(given.objects(single).when.applied().then)
    # When a one-second Schedule fires it: the first firing starts a run, the next is refused
    schedule = trigger("Schedule", "too-often", pipeline="single", interval="1s")
    then = ready(given.objects(schedule).when.applied().then)

    # Then the Schedule says so: the last firing failed, with the engine's message
    then.condition("Firing", "False", timeout=40)
    status = then.get()["status"]
    firing = status["lastFiring"]
    assert firing["result"] == "Failed" and firing.get("runId") is None, firing
    assert "concurrency: Skip" in firing["message"], firing
    [cond] = [c for c in status["conditions"] if c["type"] == "Firing"]
    assert cond["reason"] == "FiringFailed" and "concurrency: Skip" in cond["message"], cond
    # And the run the first firing started is still its last run
    [run] = runs_of(engine_client, namespace, "single", "schedule")
    assert status["lastRun"]["id"] == str(run.id), status
    # And the engine's firing history holds both outcomes
    firings = engine_client.call(lambda e: e.triggers.firings(namespace, "too-often"))
    assert {f.result for f in firings} == {"fired", "failed"}
    engine_client.call(lambda e: e.runs.cancel(namespace, run.id, reason="test over"))


def test_a_webhook_token_from_its_secret_starts_a_run(
    operator: Any,
    api: str,
    given: Given,
    kubectl: Kubectl,
    engine_client: EngineClient,
    namespace: str,
) -> None:
    # Given a Pipeline and a Webhook mapping the payload's word to the param
    ready(given.objects(pipeline("hooked")).when.applied().then)
    hook = trigger("Webhook", "inbound", pipeline="hooked", paramsFromPayload={"word": "$.word"})
    hooked = ready(given.objects(hook).when.applied().then)
    # And the token the operator minted, read from its Secret as the Webhook's owner would
    secret = kubectl.json("get", "secret", "inbound-token", "-n", namespace)
    token = base64.b64decode(secret["data"]["token"]).decode()

    # When someone POSTs with a wrong token, Then it is refused as a Problem and starts nothing
    wrong = httpx.post(f"{api}/hooks/{token[:-4]}xxxx", json={"word": "no"}, timeout=10)
    assert wrong.status_code == 404, wrong.text
    assert wrong.headers["content-type"].startswith("application/problem+json")
    assert wrong.json()["code"] == "webhook.not_found"
    assert token not in wrong.text

    # When the owner POSTs with the token, Then a run starts with the mapped param
    answer = httpx.post(f"{api}/hooks/{token}", json={"word": "hello"}, timeout=10)
    assert answer.status_code == 202, answer.text
    run_id = int(answer.json()["runId"])
    done = finished(engine_client, namespace, run_id)
    assert done.status == "succeeded", done
    assert done.triggered_by_kind == "webhook"
    assert [r.id for r in runs_of(engine_client, namespace, "hooked")] == [run_id]
    # And both deliveries are recorded, the refusal under no webhook (its token was unknown)
    deliveries = engine_client.call(lambda e: e.triggers.deliveries(namespace, "inbound"))
    assert [(d.status_code, d.run_id) for d in deliveries] == [(202, run_id)]
    # And the Webhook's status shows that delivery and its run (fed by the run's events)
    hooked.field("status.lastDelivery.outcome", equals="Accepted", timeout=30)
    last = hooked.get()["status"]["lastDelivery"]
    assert (last["runId"], last["statusCode"]) == (str(run_id), 202), last
    assert last["time"], last

    # When a delivery is refused (its param does not fit the schema), Then status shows it
    # too, though it started no run (the operator's periodic status refresh)
    refused = httpx.post(f"{api}/hooks/{token}", json={"word": 5}, timeout=10)
    assert refused.status_code >= 400, refused.text
    hooked.field("status.lastDelivery.outcome", equals="Refused", timeout=40)
    last = hooked.get()["status"]["lastDelivery"]
    assert (last.get("runId"), last["statusCode"]) == (None, refused.status_code), last
    assert last["reason"] == refused.json()["code"], (last, refused.text)


def test_an_alert_that_cannot_be_delivered_is_a_warning_event(
    operator: Any,
    given: Given,
    kubectl: Kubectl,
    engine_client: EngineClient,
    namespace: str,
) -> None:
    # Given a webhook Connection to a loopback port nothing listens on
    port = processes.free_port()
    connection = {
        "apiVersion": API,
        "kind": "Connection",
        "metadata": {"name": "pager"},
        "spec": {"type": "webhook", "settings": {"url": f"http://127.0.0.1:{port}/alert"}},
    }
    ready(given.objects(connection).when.applied().then)
    # And a Pipeline that fails, alerting through that Connection
    rule = {"name": "page-oncall", "event": "RunFailed", "notifier": "webhook"}
    steps = {"boom": {"block": "core.fail", "config": {"message": "the disk is full"}}}
    doomed = {
        "apiVersion": API,
        "kind": "Pipeline",
        "metadata": {"name": "doomed"},
        "spec": {"steps": steps, "alerts": [{**rule, "connection": "pager"}]},
    }
    ready(given.objects(doomed).when.applied().then)

    # When a run fails and every delivery of its alert is refused
    run_id = engine_client.start_run(namespace, "doomed")
    assert finished(engine_client, namespace, run_id).status == "failed"

    def given_up() -> bool:
        notes = engine_client.call(lambda e: e.runs.notifications(namespace, run_id))
        return [n.status for n in notes] == ["failed"]

    wait_until(given_up, what="the alert given up", timeout=60)

    # Then the Pipeline carries a Warning Event naming the rule, the run and the error
    def warned() -> bool:
        described = kubectl.run("describe", "pipeline", "doomed", "-n", namespace).stdout
        return "AlertFailed" in described and f"page-oncall for run {run_id}" in described

    wait_until(warned, what="an AlertFailed Warning event on the Pipeline", timeout=30)
    events = kubectl.json(
        "get", "events", "-n", namespace, "--field-selector", "reason=AlertFailed"
    )["items"]
    [event] = events  # exactly one, however many delivery attempts failed
    assert event["type"] == "Warning"
    assert event["involvedObject"]["kind"] == "Pipeline"
    assert event["involvedObject"]["name"] == "doomed"
    assert "via webhook after 5 attempt(s)" in event["message"], event["message"]
    assert f"POST http://127.0.0.1:{port}/alert failed before an answer" in event["message"]
