"""Trigger rules and status derivation as pure functions (the engine applies exactly these).

A unit test of ``rules.progression`` itself: it imports the module below the door on purpose.
"""

from __future__ import annotations

import pytest

from dirigent.engine.rules.progression import (
    Decision,
    StepState,
    advance,
    decide,
    fan_out_outcome,
    run_outcome,
)
from dirigent.engine.shapes.manifests.enums import ItemFailurePolicy, TriggerRule
from dirigent.engine.shapes.manifests.pipeline import Pipeline

S, F, K, C = "succeeded", "failed", "skipped", "cancelled"


U = "upstream_failed"
ALL = (S, F, U, K, C, None)  # None: not terminal yet


def airflow(rule: TriggerRule, outcomes: tuple[str | None, ...]) -> Decision:
    """Airflow's table, written independently of ``decide``."""
    failed = F in outcomes or U in outcomes
    done = None not in outcomes
    if rule is TriggerRule.ALL_SUCCESS:
        if failed:
            return Decision.UPSTREAM_FAILED
        if not done:
            return Decision.WAIT
        return Decision.SKIP if K in outcomes or C in outcomes else Decision.READY
    if rule is TriggerRule.ONE_FAILED:
        if failed:
            return Decision.READY
        return Decision.SKIP if done else Decision.WAIT
    return Decision.READY if done else Decision.WAIT


@pytest.mark.parametrize("rule", list(TriggerRule))
def test_decide_over_every_combination_of_two_upstreams(rule: TriggerRule) -> None:
    for a in ALL:
        assert decide(rule, [a]) is airflow(rule, (a,)), (rule, a)
        for b in ALL:
            assert decide(rule, [a, b]) is airflow(rule, (a, b)), (rule, a, b)


@pytest.mark.parametrize(
    ("rule", "outcomes", "expected"),
    [
        (TriggerRule.ALL_SUCCESS, [F, None], Decision.UPSTREAM_FAILED),  # decided at once
        (TriggerRule.ALL_SUCCESS, [U, S], Decision.UPSTREAM_FAILED),
        (TriggerRule.ALL_SUCCESS, [K, S], Decision.SKIP),
        (TriggerRule.ALL_SUCCESS, [K, None], Decision.WAIT),  # the other may yet fail
        (TriggerRule.ALL_DONE, [K, C], Decision.READY),
        (TriggerRule.ONE_FAILED, [U, None], Decision.READY),  # the handler need not wait
        (TriggerRule.ONE_FAILED, [K, S], Decision.SKIP),
        (TriggerRule.ALWAYS, [K, None], Decision.WAIT),
        (TriggerRule.ALL_SUCCESS, [], Decision.READY),
    ],
)
def test_decide(rule: TriggerRule, outcomes: list[str | None], expected: Decision) -> None:
    assert decide(rule, outcomes) is expected


def pipeline(steps: str) -> Pipeline:
    import yaml

    return Pipeline.model_validate(
        yaml.safe_load(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: p}}
spec:
  steps:
{steps}
""")
    )


def test_skips_propagate_to_a_fixpoint() -> None:
    p = pipeline("""
    a: {block: x.y}
    b: {block: x.y, dependsOn: [a]}
    c: {block: x.y, dependsOn: [b]}
    d: {block: x.y, dependsOn: [c], rule: Always}
""")
    out = advance(
        p,
        {
            "a": StepState(F),
            "b": StepState("pending"),
            "c": StepState("pending"),
            "d": StepState("pending"),
        },
    )
    assert (out.ready, out.skipped, out.upstream_failed) == (["d"], [], ["b", "c"])


def test_continue_on_failure_reads_as_success_downstream() -> None:
    p = pipeline("""
    a: {block: x.y, continueOnFailure: true}
    b: {block: x.y, dependsOn: [a]}
""")
    assert advance(p, {"a": StepState(F), "b": StepState("pending")}).ready == ["b"]
    assert run_outcome(p, {"a": StepState(F), "b": StepState(S)}) == "completed_with_errors"


@pytest.mark.parametrize(
    ("policy", "counts", "expected"),
    [
        (ItemFailurePolicy.FAIL_FAST, (3, 1, 1, 0, 0), ("failed", False)),
        (ItemFailurePolicy.CONTINUE, (3, 1, 1, 0, 0), (None, False)),
        (ItemFailurePolicy.CONTINUE, (3, 2, 1, 0, 0), ("succeeded", True)),
        (ItemFailurePolicy.CONTINUE, (2, 0, 2, 0, 0), ("failed", False)),
        (ItemFailurePolicy.CONTINUE, (2, 0, 0, 2, 0), ("skipped", False)),
        (ItemFailurePolicy.FAIL_FAST, (0, 0, 0, 0, 0), ("skipped", False)),
    ],
)
def test_fan_out_outcome(
    policy: ItemFailurePolicy, counts: tuple[int, ...], expected: tuple[str | None, bool]
) -> None:
    assert fan_out_outcome(policy, *counts) == expected


def test_run_outcome() -> None:
    p = pipeline("""
    a: {block: x.y}
    b: {block: x.y}
""")
    assert run_outcome(p, {"a": StepState(S), "b": StepState("running")}) is None
    assert run_outcome(p, {"a": StepState(S), "b": StepState(K)}) == "succeeded"
    assert (
        run_outcome(p, {"a": StepState(S, with_errors=True), "b": StepState(S)})
        == "completed_with_errors"
    )
    assert run_outcome(p, {"a": StepState(F), "b": StepState(S)}) == "failed"
