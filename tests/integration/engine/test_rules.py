"""Trigger rules, skip propagation, continueOnFailure, item policies and run status."""

from __future__ import annotations

from tests.support.harness import Harness

HEAD = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: p}
spec:
  steps:
"""


async def outcome(
    h: Harness, steps: str, params: dict[str, object] | None = None
) -> tuple[str, dict[str, str]]:
    await h.apply(HEAD + steps)
    run = await h.run("p", params)
    async with h.workers(1):
        status = await h.until_finished(run.run_id)
    return status, await h.steps(run.run_id)


async def test_linear_references_pass_outputs_typed_and_interpolated(h: Harness) -> None:
    await h.apply("""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: linear}
spec:
  params: {type: object, properties: {n: {type: integer, default: 3}}}
  steps:
    a: {block: core.echo, config: {value: {n: "${params.n}", list: [1, 2]}}}
    b: {block: core.echo, dependsOn: [a], config: {value: "${steps.a.output.value.n}"}}
    c: {block: core.echo, dependsOn: [b], config: {value: "n=${steps.b.output.value} $${literal}"}}
""")
    run = await h.run("linear")
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "succeeded"
    outputs = {a["step"]: a["output"]["value"] for a in await h.attempts(run.run_id)}
    assert outputs == {"a": {"n": 3, "list": [1, 2]}, "b": 3, "c": "n=3 ${literal}"}


async def test_all_success_skips_downstream_of_a_failure_and_propagates(h: Harness) -> None:
    status, steps = await outcome(
        h,
        """
    a: {block: core.fail, config: {errorClass: rejected}}
    b: {block: core.noop, dependsOn: [a]}
    c: {block: core.noop, dependsOn: [b]}
    side: {block: core.noop}
""",
    )
    assert status == "failed"
    assert steps == {
        "a": "failed",
        "b": "upstream_failed",
        "c": "upstream_failed",
        "side": "succeeded",
    }


async def test_one_failed_runs_the_error_handler_only_on_failure(h: Harness) -> None:
    status, steps = await outcome(
        h,
        """
    work: {block: core.fail, config: {errorClass: rejected}}
    handler: {block: core.noop, dependsOn: [work], rule: OneFailed}
""",
    )
    assert (status, steps) == ("failed", {"work": "failed", "handler": "succeeded"})


async def test_one_failed_is_skipped_when_nothing_failed(h: Harness) -> None:
    status, steps = await outcome(
        h,
        """
    work: {block: core.noop}
    handler: {block: core.noop, dependsOn: [work], rule: OneFailed}
""",
    )
    assert (status, steps) == ("succeeded", {"work": "succeeded", "handler": "skipped"})


async def test_all_done_runs_after_a_failure_and_after_an_upstream_failed(h: Harness) -> None:
    status, steps = await outcome(
        h,
        """
    bad: {block: core.fail, config: {errorClass: rejected}}
    after_bad: {block: core.noop, dependsOn: [bad], rule: AllDone}
    skipped: {block: core.noop, dependsOn: [bad]}
    after_skip: {block: core.noop, dependsOn: [skipped], rule: AllDone}
""",
    )
    assert status == "failed"
    assert steps == {
        "bad": "failed",
        "after_bad": "succeeded",
        "skipped": "upstream_failed",
        "after_skip": "succeeded",
    }


async def test_always_runs_after_anything(h: Harness) -> None:
    status, steps = await outcome(
        h,
        """
    bad: {block: core.fail, config: {errorClass: rejected}}
    skipped: {block: core.noop, dependsOn: [bad]}
    cleanup: {block: core.noop, dependsOn: [bad, skipped], rule: Always}
""",
    )
    assert steps == {"bad": "failed", "skipped": "upstream_failed", "cleanup": "succeeded"}
    assert status == "failed"


async def test_continue_on_failure_reads_as_success_and_completes_with_errors(h: Harness) -> None:
    status, steps = await outcome(
        h,
        """
    optional: {block: core.fail, continueOnFailure: true, config: {errorClass: rejected}}
    next: {block: core.noop, dependsOn: [optional]}
""",
    )
    assert (status, steps) == ("completed_with_errors", {"optional": "failed", "next": "succeeded"})


FAN = """
    each:
      block: core.fail
      forEach: [1, 2, 3, 4]
      onItemFailure: {policy}
      config: {{errorClass: rejected, times: 1}}
    after: {{block: core.noop, dependsOn: [each]}}
"""


async def test_items_continue_succeeds_with_errors_when_some_items_fail(h: Harness) -> None:
    await h.apply(
        HEAD
        + """
    each: {block: core.fail, forEach: [1, 2], onItemFailure: Continue,
           config: {errorClass: rejected, message: "${item}"}}
    ok: {block: core.echo, forEach: [1, 2], config: {value: "${item}"}}
"""
    )
    run = await h.run("p")
    async with h.workers(1):
        status = await h.until_finished(run.run_id)
    assert status == "failed"  # every item of `each` failed: nothing succeeded
    await h.apply(
        HEAD
        + """
    mixed: {block: core.sleep, forEach: [0, -1, 0], onItemFailure: Continue, config: {seconds: "${item}"}}
    after: {block: core.noop, dependsOn: [mixed]}
"""
    )
    run = await h.run("p")
    async with h.workers(1):
        status = await h.until_finished(run.run_id)
    assert status == "completed_with_errors"
    assert await h.steps(run.run_id) == {"mixed": "succeeded", "after": "succeeded"}
    items = await h.fetchval(
        "SELECT array_agg(status ORDER BY index) FROM run_items WHERE run_id = $1", run.run_id
    )
    assert items == ["succeeded", "failed", "succeeded"]


async def test_items_fail_fast_fails_the_step_and_stops_the_rest(h: Harness) -> None:
    await h.apply(
        HEAD
        + """
    each: {block: core.sleep, forEach: [-1, 30, 30, 30], onItemFailure: FailFast, config: {seconds: "${item}"}}
    after: {block: core.noop, dependsOn: [each]}
"""
    )
    run = await h.run("p")
    async with h.workers(1, concurrency=1):  # the failing item is claimed first, alone
        assert await h.until_finished(run.run_id) == "failed"
    assert await h.steps(run.run_id) == {"each": "failed", "after": "upstream_failed"}
    attempts = await h.attempts(run.run_id, "each")
    # The rest stopped: cancelled (a 30s sleep would have outlived the test). A worker's
    # slot is free as soon as a block returns, so item 1 may have been claimed while item
    # 0's failure was committing; if so, it was cancelled under the worker. Nothing after it
    # ever started.
    assert [(a["item_index"], a["status"]) for a in attempts] == [
        (0, "failed"),
        (1, "cancelled"),
        (2, "cancelled"),
        (3, "cancelled"),
    ]
    assert [a["started_at"] for a in attempts[2:]] == [None, None]
    assert all(a["finished_at"] is not None for a in attempts)
    items = await h.fetchval(
        "SELECT row(items_failed, items_cancelled)::text FROM run_steps "
        "WHERE run_id = $1 AND step = 'each'",
        run.run_id,
    )
    assert items == "(1,3)"


async def test_an_empty_fan_out_is_skipped(h: Harness) -> None:
    status, steps = await outcome(
        h,
        """
    each: {block: core.noop, forEach: []}
    after: {block: core.noop, dependsOn: [each]}
    cleanup: {block: core.noop, dependsOn: [each], rule: Always}
""",
    )
    assert steps == {"each": "skipped", "after": "skipped", "cleanup": "succeeded"}
    assert status == "succeeded"


async def test_an_unknown_reference_fails_the_attempt_as_rejected(h: Harness) -> None:
    await h.apply(
        HEAD
        + """
    a: {block: core.echo, config: {value: {}}}
    b: {block: core.echo, dependsOn: [a], config: {value: "${steps.a.output.value.missing}"}}
"""
    )
    run = await h.run("p")
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "failed"
    [b] = await h.attempts(run.run_id, "b")
    assert (b["error_class"], b["error_code"]) == ("rejected", "reference.unresolved")
    row = await h.fetchval(
        "SELECT row(failed_step, error_message)::text FROM runs WHERE id = $1", run.run_id
    )
    assert row.startswith("(b,") and "missing" in row
