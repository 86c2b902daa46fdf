"""Trigger rules and status derivation as pure functions (the engine applies exactly these)."""

from __future__ import annotations

import pytest

from dirigent.engine.manifests.enums import ItemFailurePolicy, TriggerRule
from dirigent.engine.manifests.pipeline import Pipeline
from dirigent.engine.progression import (
    Decision,
    StepState,
    advance,
    decide,
    fan_out_outcome,
    run_outcome,
)

S, F, K, C = "succeeded", "failed", "skipped", "cancelled"


@pytest.mark.parametrize(
    ("rule", "outcomes", "expected"),
    [
        (TriggerRule.ALL_SUCCESS, [S, S], Decision.READY),
        (TriggerRule.ALL_SUCCESS, [S, None], Decision.WAIT),
        (
            TriggerRule.ALL_SUCCESS,
            [F, None],
            Decision.SKIP,
        ),  # unsatisfiable forever: decided at once
        (TriggerRule.ALL_SUCCESS, [K, S], Decision.SKIP),
        (TriggerRule.ALL_DONE, [F, S], Decision.READY),
        (TriggerRule.ALL_DONE, [F, None], Decision.WAIT),
        (TriggerRule.ALL_DONE, [K, S], Decision.SKIP),
        (TriggerRule.ONE_FAILED, [F, None], Decision.READY),  # the handler need not wait
        (TriggerRule.ONE_FAILED, [S, S], Decision.SKIP),
        (TriggerRule.ONE_FAILED, [S, None], Decision.WAIT),
        (TriggerRule.ALWAYS, [K, C], Decision.READY),
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
    ready, skipped = advance(
        p,
        {
            "a": StepState(F),
            "b": StepState("pending"),
            "c": StepState("pending"),
            "d": StepState("pending"),
        },
    )
    assert (ready, skipped) == (["d"], ["b", "c"])


def test_continue_on_failure_reads_as_success_downstream() -> None:
    p = pipeline("""
    a: {block: x.y, continueOnFailure: true}
    b: {block: x.y, dependsOn: [a]}
""")
    assert advance(p, {"a": StepState(F), "b": StepState("pending")}) == (["b"], [])
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
