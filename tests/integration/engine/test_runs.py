"""Run creation: pinned version, params with defaults, fan-out drawn at creation,
priority pinned, concurrency policies, attribution and window."""

from __future__ import annotations

import pytest

from dirigent.engine.shapes.manifests.enums import Priority
from dirigent.engine.shapes.problems import ProblemsError
from tests.support.harness import Harness, utc

FAN = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: fan}
spec:
  priority: Low
  params:
    type: object
    required: [day]
    properties:
      day: {type: string}
      regions: {type: array, items: {type: string}, default: ["no", "se", "dk"]}
  steps:
    each: {block: core.echo, forEach: "${params.regions}", config: {value: "${item}-${params.day}"}}
    pair: {block: core.echo, dependsOn: [each], forEach: "${steps.each.items}",
           config: {value: "${steps.each.item.output.value}"}}
"""


async def test_params_defaults_and_fan_out_grid_exist_at_creation(h: Harness) -> None:
    await h.apply(FAN)
    run = await h.run("fan", {"day": "2026-12-01"})
    params = await h.fetchval("SELECT params FROM runs WHERE id = $1", run.run_id)
    assert params == {"day": "2026-12-01", "regions": ["no", "se", "dk"]}
    grid = await h.fetchval(
        "SELECT array_agg(value::text ORDER BY index) FROM run_items WHERE run_id = $1 AND step = 'each'",
        run.run_id,
    )
    assert grid == ['"no"', '"se"', '"dk"']
    assert await h.fetchval("SELECT count(*) FROM step_attempts WHERE run_id = $1", run.run_id) == 6
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "succeeded"
    paired = [a["output"]["value"] for a in await h.attempts(run.run_id, "pair")]
    assert paired == ["no-2026-12-01", "se-2026-12-01", "dk-2026-12-01"]


async def test_bad_params_are_refused_with_every_problem(h: Harness) -> None:
    await h.apply(FAN)
    with pytest.raises(ProblemsError) as refused:
        await h.run("fan", {"regions": [1]})
    codes = sorted((p.code, p.location) for p in refused.value.problems)
    assert ("run.params.invalid", "params") in codes  # day is required
    assert ("run.params.invalid", "params.regions[0]") in codes
    assert await h.fetchval("SELECT count(*) FROM runs") == 0


async def test_a_run_pins_its_version_and_priority(h: Harness) -> None:
    await h.apply(FAN)
    run = await h.run("fan", {"day": "d"})
    await h.apply(FAN.replace("priority: Low", "priority: High"))
    later = await h.run("fan", {"day": "d"}, priority=Priority.NORMAL)
    rows = await h.fetchval("SELECT array_agg(priority ORDER BY id) FROM runs")
    assert rows == [0, 1]
    versions = await h.fetchval("SELECT array_agg(version_id ORDER BY id) FROM runs")
    assert versions[0] != versions[1]
    assert await h.fetchval(
        "SELECT bool_and(priority = 0) FROM step_attempts WHERE run_id = $1", run.run_id
    )
    assert later.status == "running"


async def test_attribution_and_window_are_recorded(h: Harness) -> None:
    await h.apply(FAN)
    window = (utc(2026, 12, 1), utc(2026, 12, 2))
    run = await h.run(
        "fan", {"day": "d"}, triggered_by_kind="schedule", triggered_by_ref="nightly", window=window
    )
    row = await h.fetchval(
        "SELECT row(triggered_by_kind, triggered_by_ref, window_start, window_end)::text FROM runs WHERE id = $1",
        run.run_id,
    )
    assert row.startswith('(schedule,nightly,"2026-12-01 00:00:00+00","2026-12-02 00:00:00+00")')


def policy(name: str) -> str:
    return f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: pol}}
spec:
  concurrency: {name}
  steps:
    hold: {{block: core.sleep, config: {{seconds: 0.3}}}}
"""


async def test_concurrency_skip_refuses_a_second_run(h: Harness) -> None:
    await h.apply(policy("Skip"))
    await h.run("pol")
    with pytest.raises(ProblemsError) as refused:
        await h.run("pol")
    assert refused.value.problems[0].code == "run.concurrency.skipped"


async def test_concurrency_queue_starts_the_next_when_one_finishes(h: Harness) -> None:
    await h.apply(policy("Queue"))
    first = await h.run("pol")
    second = await h.run("pol")
    assert (first.status, second.status) == ("running", "queued")
    async with h.workers(1):
        assert await h.until_finished(first.run_id) == "succeeded"
        assert await h.until_finished(second.run_id) == "succeeded"
    starts = await h.fetchval("SELECT array_agg(started_at ORDER BY id) FROM runs")
    finishes = await h.fetchval("SELECT array_agg(finished_at ORDER BY id) FROM runs")
    assert starts[1] >= finishes[0]


async def test_concurrency_replace_cancels_the_run_in_flight(h: Harness) -> None:
    await h.apply(policy("Replace"))
    first = await h.run("pol")
    second = await h.run("pol")
    assert second.replaced == (first.run_id,)
    assert await h.status(first.run_id) == "cancelled"
    async with h.workers(1):
        assert await h.until_finished(second.run_id) == "succeeded"


async def test_concurrency_allow_runs_side_by_side(h: Harness) -> None:
    await h.apply(policy("Allow"))
    runs = [await h.run("pol") for _ in range(3)]
    assert {r.status for r in runs} == {"running"}


async def test_idempotency_key_returns_the_same_run(h: Harness) -> None:
    await h.apply(policy("Allow"))
    first = await h.run("pol", idempotency_key="k1")
    again = await h.run("pol", idempotency_key="k1")
    assert again.run_id == first.run_id
    assert not again.created
