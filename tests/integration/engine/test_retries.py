"""Retries: per-step budget spent by transient and unknown failures, never by rejected;
a retry is a new attempt row due in the future — no worker sleeps."""

from __future__ import annotations

import datetime as dt

from tests.support.harness import Harness
from tests.support.waiting import eventually


def pipeline(
    error_class: str, times: int | None, max_attempts: int, backoff: str = "10ms", cap: str = "1s"
) -> str:
    times_line = f", times: {times}" if times else ""
    return f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: r}}
spec:
  steps:
    flaky:
      block: core.fail
      retry: {{maxAttempts: {max_attempts}, backoff: {backoff}, maxBackoff: {cap}}}
      config: {{errorClass: {error_class}{times_line}}}
"""


async def test_transient_failures_are_retried_until_success(h: Harness) -> None:
    await h.apply(pipeline("transient", times=2, max_attempts=3))
    run = await h.run("r")
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "succeeded"
    attempts = await h.attempts(run.run_id)
    assert [(a["number"], a["status"]) for a in attempts] == [
        (1, "failed"),
        (2, "failed"),
        (3, "succeeded"),
    ]
    assert all(a["kind"] == "automatic" for a in attempts)


async def test_unknown_failures_spend_the_budget_then_fail(h: Harness) -> None:
    await h.apply(pipeline("unknown", times=None, max_attempts=2))
    run = await h.run("r")
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "failed"
    assert [a["status"] for a in await h.attempts(run.run_id)] == ["failed", "failed"]


async def test_rejected_failures_fail_at_once(h: Harness) -> None:
    await h.apply(pipeline("rejected", times=None, max_attempts=5))
    run = await h.run("r")
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "failed"
    [only] = await h.attempts(run.run_id)
    assert (only["error_class"], only["error_code"]) == ("rejected", "core.fail.requested")


async def test_a_retry_is_a_row_due_later_not_a_sleeping_worker(h: Harness) -> None:
    await h.apply(pipeline("transient", times=1, max_attempts=2, backoff="1h", cap="2h"))
    run = await h.run("r")
    async with h.workers(1):
        await eventually(
            lambda: h.fetchval("SELECT count(*) FROM step_attempts WHERE run_id = $1", run.run_id),
            lambda n: n == 2,
            what="the retry's row",
        )
    first, second = await h.attempts(run.run_id)
    assert first["status"] == "failed" and second["status"] == "queued"
    delay = second["available_at"] - first["finished_at"]
    assert (
        dt.timedelta(minutes=29) < delay <= dt.timedelta(hours=1, seconds=1)
    )  # jitter: half to full
    assert await h.status(run.run_id) == "running"
