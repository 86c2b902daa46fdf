"""Alerts raised with the finishing transaction, delivered by workers through catalog notifiers,
retried against a flaky loopback receiver; reports rendered at finish."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from dirigent.engine import ProblemsError
from tests.support.harness import Harness
from tests.support.servers import serve
from tests.support.waiting import eventually

PIPELINE = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: nightly}}
spec:
  importance: {importance}
  steps:
    a: {{block: testing.flaky, config: {{needs: {needs}}}}}
  report:
    template: |
      # {{{{ run.pipeline }}}} {{{{ run.status }}}}
      {{% for s in run.steps %}}- {{{{ s.name }}}}: {{{{ s.status }}}}
      {{% endfor %}}
  alerts:
{alerts}
"""

RULE = """    - name: {name}
      event: {event}
      notifier: testing.post
      connection: receiver
{extra}"""

CONNECTION = """
apiVersion: dirigent.dev/v1alpha1
kind: Connection
metadata: {{name: receiver}}
spec:
  type: http
  settings: {{url: "{url}"}}
"""


class Receiver:
    """A loopback alert receiver answering a scripted sequence of statuses."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses
        self.calls: list[dict[str, Any]] = []
        self.app = FastAPI()
        self.app.post("/alert")(self.receive)

    async def receive(self, request: Request) -> JSONResponse:
        body = await request.json()
        status = self.statuses[len(self.calls)] if len(self.calls) < len(self.statuses) else 200
        self.calls.append({"status": status, **body})
        return JSONResponse({}, status_code=status)


async def setup(
    h: Harness, tmp_path: Path, url: str, rules: str, importance: str = "Normal"
) -> None:
    await h.apply(CONNECTION.format(url=url))
    await h.apply(PIPELINE.format(importance=importance, needs=tmp_path / "never", alerts=rules))


async def test_flaky_receiver_gets_the_alert_exactly_once(h: Harness, tmp_path: Path) -> None:
    receiver = Receiver([500, 500, 200])
    async with serve(receiver.app) as base:
        rule = RULE.format(
            name="page",
            event="RunFailed",
            extra='      subject: "{{ run.pipeline }} failed: {{ run.failed_step }}"',
        )
        await setup(h, tmp_path, f"{base}/alert", rule)
        run = await h.run("nightly")
        async with h.workers(1, notification_backoff=dt.timedelta(milliseconds=200)):
            assert await h.until_finished(run.run_id) == "failed"

            async def delivered() -> bool:
                [n] = await h.engine.runs.notifications("default", run.run_id)
                return n.status == "delivered"

            await eventually(delivered, timeout=30, what="the alert delivered")
    assert [c["status"] for c in receiver.calls] == [500, 500, 200]
    assert {c["title"] for c in receiver.calls} == {"nightly failed: a"}
    assert receiver.calls[-1]["links"]["report"].endswith(f"/runs/{run.run_id}/report")
    [n] = await h.engine.runs.notifications("default", run.run_id)
    assert (n.attempts, n.event, n.rule) == (3, "run_failed", "page")
    messages = [line["message"] for line in await h.logs(run.run_id)]
    assert any("alert page queued" in m for m in messages)
    assert sum("retrying in" in m for m in messages) == 2
    assert any("alert page delivered" in m for m in messages)
    report = await h.engine.runs.report("default", run.run_id)
    assert report is not None and report.startswith("# nightly failed") and "- a: failed" in report


async def test_a_receiver_that_never_recovers_is_given_up(h: Harness, tmp_path: Path) -> None:
    receiver = Receiver([503] * 10)
    async with serve(receiver.app) as base:
        await setup(
            h, tmp_path, f"{base}/alert", RULE.format(name="page", event="RunFailed", extra="")
        )
        run = await h.run("nightly")
        async with h.workers(
            1,
            notification_backoff=dt.timedelta(milliseconds=50),
            notification_attempts=3,
        ):
            await h.until_finished(run.run_id)

            async def gave_up() -> bool:
                [n] = await h.engine.runs.notifications("default", run.run_id)
                return n.status == "failed"

            await eventually(gave_up, timeout=30, what="the alert given up")
    assert len(receiver.calls) == 3
    messages = [line["message"] for line in await h.logs(run.run_id)]
    assert any("gave up after 3 attempt(s)" in m for m in messages)


async def test_rules_match_by_event_importance_and_throttle(h: Harness, tmp_path: Path) -> None:
    rules = "\n".join(
        [
            RULE.format(name="any-failure", event="RunFailed", extra="      throttle: 1h"),
            RULE.format(
                name="critical-only", event="RunFailed", extra="      importance: Critical"
            ),
            RULE.format(name="routine-floor", event="RunFailed", extra="      importance: Routine"),
            RULE.format(name="on-success", event="RunSucceeded", extra=""),
        ]
    )
    await setup(h, tmp_path, "http://127.0.0.1:9/alert", rules)
    first = await h.run("nightly")
    second = await h.run("nightly")
    async with h.workers(1):
        await h.until_finished(first.run_id)
        await h.until_finished(second.run_id)
    raised = {
        run: sorted(n.rule for n in await h.engine.runs.notifications("default", run))
        for run in (first.run_id, second.run_id)
    }
    # Normal importance: the Critical floor does not match, the Routine floor does; the
    # throttled rule raises once across both runs; nothing for success.
    assert sorted(raised[first.run_id] + raised[second.run_id]) == [
        "any-failure",
        "routine-floor",
        "routine-floor",
    ]
    throttled = [
        m["message"]
        for run in (first.run_id, second.run_id)
        for m in await h.logs(run)
        if "throttled" in m["message"]
    ]
    assert throttled == ["alert any-failure throttled (1h)"]


async def test_templates_refused_at_apply_and_degraded_at_render(
    h: Harness, tmp_path: Path
) -> None:
    bad = RULE.format(name="typo", event="RunFailed", extra='      subject: "{{ run.id "')
    with pytest.raises(ProblemsError) as refused:
        await setup(h, tmp_path, "http://127.0.0.1:9/alert", bad)
    assert [(p.code, p.location) for p in refused.value.problems] == [
        ("pipeline.alert.template_invalid", "spec.alerts[0].subject")
    ]
    unknown = RULE.format(name="x", event="RunFailed", extra="").replace(
        "testing.post", "pager.duty"
    )
    with pytest.raises(ProblemsError) as missing:
        await setup(h, tmp_path, "http://127.0.0.1:9/alert", unknown)
    assert [p.code for p in missing.value.problems] == ["pipeline.alert.notifier_unknown"]
    # Compiles, but fails at render (the sandbox refuses): the default subject goes out.
    sandboxed = RULE.format(
        name="sneaky",
        event="RunFailed",
        extra='      subject: "{{ run.__class__.__mro__[1].__subclasses__() }}"\n'
        '      body: "{{ run.missing.deeper }}|{{ run.error }}"',
    )
    await setup(h, tmp_path, "http://127.0.0.1:9/alert", sandboxed)
    run = await h.run("nightly")
    async with h.workers(1):
        await h.until_finished(run.run_id)
    [n] = await h.engine.runs.notifications("default", run.run_id)
    assert n.subject == f"[dirigent] nightly run {run.run_id} failed"
    assert n.body.startswith("|")  # an unknown name renders empty, the error follows
    warnings = [m["message"] for m in await h.logs(run.run_id) if m["level"] == "warning"]
    assert any("subject template failed" in w for w in warnings)


async def test_stuck_run_raises_run_stuck_once(h: Harness, tmp_path: Path) -> None:
    rules = RULE.format(name="stuck", event="RunStuck", extra="")
    await h.apply(CONNECTION.format(url="http://127.0.0.1:9/alert"))
    await h.apply(
        """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: nightly}
spec:
  steps:
    a: {block: testing.flaky, config: {needs: /nonexistent}}
  alerts:
"""
        + rules
    )  # no worker runs: the run stays running, and the sweeper's flag makes it stuck
    run = await h.run("nightly")
    await h.execute("UPDATE runs SET stuck_at = now() WHERE id = $1", run.run_id)
    deliverer = h.worker()._deliverer()
    await deliverer.sweep()
    await deliverer.sweep()  # re-detection is harmless: one row per (run, rule, event)
    [n] = await h.engine.runs.notifications("default", run.run_id)
    assert (n.event, n.rule, n.status) == ("run_stuck", "stuck", "queued")
