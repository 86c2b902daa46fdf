"""Airflow's trigger rules, over every combination of upstream outcomes, on a real run.

One pipeline holds the whole table: two sources of each outcome (succeeded, failed,
upstream_failed, skipped), and for each rule one step per combination of one or two of them.
"""

from __future__ import annotations

import itertools

import pytest

from tests.support.harness import Harness

OUTCOMES = ("ok", "bad", "uf", "sk")
RULES = ("AllSuccess", "AllDone", "OneFailed", "Always")
SOURCES = """
    ok1: {block: core.noop}
    ok2: {block: core.noop}
    bad1: {block: core.fail, config: {errorClass: rejected}}
    bad2: {block: core.fail, config: {errorClass: rejected}}
    uf1: {block: core.noop, dependsOn: [bad1]}
    uf2: {block: core.noop, dependsOn: [bad2]}
    sk1: {block: core.noop, forEach: []}
    sk2: {block: core.noop, forEach: []}
"""


def expected(rule: str, ups: tuple[str, ...]) -> str:
    """Airflow's table: what a step with these upstream outcomes ends as."""
    failed = any(u in ("bad", "uf") for u in ups)
    if rule == "AllSuccess":
        if failed:
            return "upstream_failed"
        return "skipped" if "sk" in ups else "succeeded"
    if rule == "OneFailed":
        return "succeeded" if failed else "skipped"
    return "succeeded"  # AllDone, Always


def combinations() -> list[tuple[str, ...]]:
    singles = [(o,) for o in OUTCOMES]
    pairs = list(itertools.combinations_with_replacement(OUTCOMES, 2))
    return singles + pairs


def step_name(rule: str, ups: tuple[str, ...]) -> str:
    return f"{rule.lower()}__{'_'.join(ups)}"


async def test_every_rule_over_every_upstream_combination(h: Harness) -> None:
    lines = [SOURCES]
    cases: dict[str, str] = {}
    for rule in RULES:
        for ups in combinations():
            deps = (
                [f"{u}1" for u in ups]
                if len(set(ups)) == len(ups)
                else [f"{ups[0]}1", f"{ups[0]}2"]
            )
            name = step_name(rule, ups)
            lines.append(
                f"    {name}: {{block: core.noop, dependsOn: [{', '.join(deps)}], rule: {rule}}}\n"
            )
            cases[name] = expected(rule, ups)
    await h.apply(
        "apiVersion: dirigent.dev/v1alpha1\nkind: Pipeline\nmetadata: {name: rules}\n"
        "spec:\n  steps:\n" + "".join(lines)
    )
    run = await h.run("rules")
    async with h.workers(2):
        assert await h.until_finished(run.run_id) == "failed"
    steps = await h.steps(run.run_id)
    assert {n: steps[n] for n in cases} == cases
    assert (steps["uf1"], steps["sk1"]) == ("upstream_failed", "skipped")
    # upstream_failed is a status of the step only; its attempt reads skipped.
    [uf] = await h.attempts(run.run_id, "uf1")
    assert uf["status"] == "skipped"


SEED = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: climate}}
spec:
  params: {{type: object, properties: {{regions: {{type: array, default: ["no", "se", "dk"]}}}}}}
  steps:
    wait_for_drop: {{block: core.wait, poll: 50ms, deadline: 200ms, onTimeout: {on_timeout}, config: {{pokes: 100000}}}}
    push:
      block: core.echo
      dependsOn: [wait_for_drop]
      forEach: "${{params.regions}}"
      onItemFailure: Continue
      config: {{value: "${{item}}"}}
    notify_failure: {{block: core.noop, dependsOn: [push], rule: OneFailed}}
"""


@pytest.mark.parametrize(
    ("on_timeout", "run_status", "push", "notify"),
    [
        ("Fail", "failed", "upstream_failed", "succeeded"),
        ("Skip", "succeeded", "skipped", "skipped"),
    ],
)
async def test_the_seeds_error_handler_fires_when_push_never_ran_because_its_upstream_failed(
    h: Harness, on_timeout: str, run_status: str, push: str, notify: str
) -> None:
    await h.apply(SEED.format(on_timeout=on_timeout))
    run = await h.run("climate")
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == run_status
    steps = await h.steps(run.run_id)
    assert (steps["push"], steps["notify_failure"]) == (push, notify)
    items = await h.fetchval(
        "SELECT array_agg(DISTINCT status) FROM run_items WHERE run_id = $1", run.run_id
    )
    assert items == ["skipped"]


async def test_failed_step_names_the_failure_that_failed_the_run_not_a_tolerated_one(
    h: Harness,
) -> None:
    await h.apply("""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: tolerated}
spec:
  steps:
    first: {block: core.fail, continueOnFailure: true, config: {errorClass: rejected}}
    carry_on: {block: core.noop, dependsOn: [first]}
    second: {block: core.fail, dependsOn: [carry_on], config: {errorClass: rejected}}
""")
    run = await h.run("tolerated")
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "failed"
    assert await h.steps(run.run_id) == {
        "first": "failed",
        "carry_on": "succeeded",
        "second": "failed",
    }
    assert await h.fetchval("SELECT failed_step FROM runs WHERE id = $1", run.run_id) == "second"
