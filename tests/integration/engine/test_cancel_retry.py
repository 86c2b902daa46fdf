"""Cancellation and manual retry, through the door (``engine.runs.cancel`` and ``retry``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dirigent.engine import ProblemsError
from tests.support.harness import Harness
from tests.support.waiting import eventually


async def test_cancel_finishes_everything_in_one_go_and_tells_remote_work(
    h: Harness, tmp_path: Path
) -> None:
    log = tmp_path / "rec.log"
    await h.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: c}}
spec:
  steps:
    remote: {{block: testing.remote, poll: 100ms, config: {{dir: "{tmp_path}", polls: 100000}}}}
    busy: {{block: testing.record, config: {{path: "{log}", sleep: 30}}}}
    later: {{block: core.noop, dependsOn: [busy]}}
""")
    run = await h.run("c")
    async with h.workers(1, heartbeat=__import__("datetime").timedelta(milliseconds=200)) as [
        worker
    ]:
        await eventually(
            lambda: log.exists() and (tmp_path / "events.log").exists(),
            what="busy started and the remote job submitted",
        )
        await eventually(
            lambda: h.fetchval("SELECT status FROM step_attempts WHERE step = 'remote'"),
            lambda status: status == "waiting",
            what="the remote attempt waiting",
        )
        told = await h.cancel(run.run_id, reason="operator asked")
        assert told == 1
        assert await h.status(run.run_id) == "cancelled"
        statuses = {a["step"]: a["status"] for a in await h.attempts(run.run_id)}
        assert statuses == {"remote": "cancelled", "busy": "cancelled", "later": "cancelled"}
        # The worker holding `busy` notices at its next heartbeat and stops the block call.
        await eventually(lambda: not worker._tasks, timeout=10, what="the busy call stopped")
    assert "cancel" in [ln.split()[0] for ln in (tmp_path / "events.log").read_text().splitlines()]
    assert [ln.split()[0] for ln in log.read_text().splitlines()] == ["start"]  # never finished
    assert await h.status(run.run_id) == "cancelled"  # the abandoned call recorded nothing


FLAKY = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: m}
spec:
  params: {type: object, properties: {fail: {type: boolean, default: true}}}
  steps:
    first: {block: testing.record, config: {path: "%s"}}
    second: {block: core.fail, dependsOn: [first], retry: {maxAttempts: 1},
             config: {errorClass: transient, times: 1}}
    third: {block: core.echo, dependsOn: [second], config: {value: "${steps.first.output.attempt_id}"}}
"""


async def test_manual_retry_resumes_from_the_failed_step_only(h: Harness, tmp_path: Path) -> None:
    log = tmp_path / "rec.log"
    await h.apply(FLAKY % log)
    run = await h.run("m")
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "failed"
        assert await h.steps(run.run_id) == {
            "first": "succeeded",
            "second": "failed",
            "third": "upstream_failed",
        }
        retried = await h.retry(run.run_id, "second", "k1")
        again = await h.retry(run.run_id, "second", "k1")
        assert again.attempt_ids == retried.attempt_ids and not again.created
        assert await h.until_finished(run.run_id) == "succeeded"
    second = await h.attempts(run.run_id, "second")
    assert [(a["number"], a["kind"], a["status"]) for a in second] == [
        (1, "automatic", "failed"),
        (2, "manual", "succeeded"),
    ]
    [first] = await h.attempts(run.run_id, "first")
    third = await h.attempts(run.run_id, "third")
    assert third[-1]["output"] == {"value": first["id"]}  # read the stored upstream output
    assert (
        len(log.read_text().splitlines()) == 2
    )  # `first` ran once (start + end): nothing upstream re-ran


async def test_a_manual_attempt_is_never_retried_automatically(h: Harness) -> None:
    await h.apply("""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: m2}
spec:
  steps:
    bad: {block: core.fail, retry: {maxAttempts: 5, backoff: 10ms}, config: {errorClass: transient}}
""")
    run = await h.run("m2")
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "failed"
        await h.retry(run.run_id, "bad", "once")
        assert await h.until_finished(run.run_id) == "failed"
    attempts = await h.attempts(run.run_id, "bad")
    assert [a["kind"] for a in attempts] == ["automatic"] * 5 + ["manual"]


async def test_manual_retry_of_exactly_the_failed_items(h: Harness, tmp_path: Path) -> None:
    await h.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: items}}
spec:
  steps:
    each: {{block: testing.flaky, forEach: [1, 2, 3, 4], onItemFailure: Continue,
           config: {{needs: "{tmp_path}/ok-${{item}}"}}}}
    after: {{block: core.noop, dependsOn: [each]}}
""")
    for n in (1, 2):
        (tmp_path / f"ok-{n}").touch()
    run = await h.run("items")
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "completed_with_errors"
        for n in (3, 4):
            (tmp_path / f"ok-{n}").touch()
        retried = await h.retry(run.run_id, "each", "items")
        assert len(retried.attempt_ids) == 2
        assert await h.until_finished(run.run_id) == "succeeded"
    manual = [a["item_index"] for a in await h.attempts(run.run_id) if a["kind"] == "manual"]
    assert manual == [2, 3]
    counts = await h.fetchval(
        "SELECT row(items_succeeded, items_failed, items_cancelled, with_errors)::text FROM run_steps "
        "WHERE run_id = $1 AND step = 'each'",
        run.run_id,
    )
    assert counts == "(4,0,0,f)"


async def test_retry_refuses_a_step_that_did_not_fail(h: Harness) -> None:
    await h.apply("""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: ok}
spec:
  steps:
    fine: {block: core.noop}
""")
    run = await h.run("ok")
    async with h.workers(1):
        await h.until_finished(run.run_id)
    with pytest.raises(ProblemsError) as refused:
        await h.retry(run.run_id, "fine", "x")
    assert refused.value.problems[0].code == "retry.step.not_failed"


async def test_manual_retry_of_a_fail_fast_fan_out_finishes_and_counters_match_rows(
    h: Harness, tmp_path: Path
) -> None:
    await h.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: fast}}
spec:
  steps:
    each: {{block: testing.flaky, forEach: [1, 2, 3, 4], config: {{needs: "{tmp_path}/ok-${{item}}"}}}}
    after: {{block: core.noop, dependsOn: [each]}}
""")
    run = await h.run("fast")
    async with h.workers(1, concurrency=1):
        assert await h.until_finished(run.run_id) == "failed"
        counts = await h.fetchval(
            "SELECT row(items_failed, items_cancelled)::text FROM run_steps "
            "WHERE run_id = $1 AND step = 'each'",
            run.run_id,
        )
        assert counts == "(1,3)", "FailFast counts the items it cancelled"
        for n in (1, 2, 3, 4):
            (tmp_path / f"ok-{n}").touch()
        retried = await h.retry(run.run_id, "each", "k")
        assert len(retried.attempt_ids) == 4
        assert await h.until_finished(run.run_id) == "succeeded"
    assert await h.steps(run.run_id) == {"each": "succeeded", "after": "succeeded"}


TWO_FAILURES = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: keys}
spec:
  steps:
    a: {block: core.fail, config: {errorClass: rejected}}
    b: {block: core.fail, config: {errorClass: rejected}}
"""


async def test_a_retry_key_is_exact_per_run_and_a_reused_key_is_refused(h: Harness) -> None:
    await h.apply(TWO_FAILURES)
    run = await h.run("keys")
    other = await h.run("keys")
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "failed"
        assert await h.until_finished(other.run_id) == "failed"
    first = await h.retry(run.run_id, "a", "a-1")
    # A key holding LIKE wildcards is matched exactly: it is a new request, not "a-1" again.
    wild = await h.retry(run.run_id, "b", "a%")
    assert wild.created and wild.attempt_ids != first.attempt_ids
    # The same key on another run is that run's own key.
    elsewhere = await h.retry(other.run_id, "a", "a-1")
    assert elsewhere.created
    # The same key for another step of the same run is refused, not answered with a's attempts.
    with pytest.raises(ProblemsError) as refused:
        await h.retry(other.run_id, "b", "a-1")
    assert refused.value.problems[0].code == "retry.idempotency_key.reused"
    stored = await h.fetchval(
        "SELECT array_agg(DISTINCT idempotency_key ORDER BY idempotency_key) FROM step_attempts "
        "WHERE idempotency_key IS NOT NULL"
    )
    assert stored == ["a%", "a-1"]


async def test_a_reopened_step_keeps_its_automatic_retries(h: Harness) -> None:
    await h.apply("""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: reopen}
spec:
  steps:
    first: {block: core.fail, config: {errorClass: rejected, times: 1}}
    second: {block: core.fail, dependsOn: [first], retry: {maxAttempts: 2, backoff: 10ms},
             config: {errorClass: transient}}
""")
    run = await h.run("reopen")
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "failed"
        assert (await h.steps(run.run_id))["second"] == "upstream_failed"
        await h.retry(run.run_id, "first", "again")
        assert await h.until_finished(run.run_id) == "failed"
    second = await h.attempts(run.run_id, "second")
    assert [(a["number"], a["kind"], a["status"]) for a in second] == [
        (1, "automatic", "failed"),
        (2, "automatic", "failed"),
    ], "the reopened step gets both of its tries"
