"""Backfill: one run per window, in order, attributed, concurrency respected, capped, dry run."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from dirigent.engine import ProblemsError
from dirigent.engine.shapes.views import BackfillRequest
from tests.support.harness import Harness

PIPELINE = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: load}}
spec:
  concurrency: {concurrency}
  steps:
    a: {{block: testing.record, config: {{path: {path}}}}}
"""

SCHEDULE = """
apiVersion: dirigent.dev/v1alpha1
kind: Schedule
metadata: {{name: {name}}}
spec: {{pipeline: load, {clock}, timezone: Europe/Oslo}}
"""


def utc(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=dt.UTC)  # type: ignore[misc]


async def setup(h: Harness, tmp_path: Path, concurrency: str = "Allow") -> None:
    await h.apply(PIPELINE.format(concurrency=concurrency, path=tmp_path / "rec"))
    await h.apply(SCHEDULE.format(name="nightly", clock="cron: '0 5 * * *'"))
    await h.apply(SCHEDULE.format(name="once", clock="at: '2030-01-01T00:00:00Z'"))


async def test_one_run_per_window_in_order_and_the_clock_untouched(
    h: Harness, tmp_path: Path
) -> None:
    await setup(h, tmp_path)
    before = await h.engine.triggers.schedule("default", "nightly")
    result = await h.engine.triggers.backfill(
        "default",
        "load",
        BackfillRequest(schedule="nightly", start=utc(2026, 3, 27), end=utc(2026, 3, 31)),
    )
    assert (result.created, result.refused) == (4, 0)
    runs = [w.run_id for w in result.windows]
    assert runs == sorted(runs)  # created in chronological order
    spans = [(w.end - w.start) for w in result.windows]
    # 05:00 Oslo each day; the window ending on the spring-forward day is 23 hours.
    assert spans == [
        dt.timedelta(hours=24),
        dt.timedelta(hours=24),
        dt.timedelta(hours=23),
        dt.timedelta(hours=24),
    ]
    rows = await h.fetchval(
        "SELECT array_agg(row(triggered_by_kind, triggered_by_ref, window_start, window_end) ORDER BY id) FROM runs"
    )
    assert [tuple(r)[:2] for r in rows] == [("backfill", "schedule/nightly")] * 4
    assert [(r[2], r[3]) for r in rows] == [(w.start, w.end) for w in result.windows]
    assert await h.engine.triggers.schedule("default", "nightly") == before
    assert await h.engine.triggers.firings("default", "nightly") == []
    # Half-open: the adjacent range does not repeat the last window.
    nxt = await h.engine.triggers.backfill(
        "default",
        "load",
        BackfillRequest(schedule="nightly", start=utc(2026, 3, 31), end=utc(2026, 4, 2)),
    )
    assert nxt.windows[0].start == result.windows[-1].end


async def test_concurrency_is_respected_and_reported_per_window(h: Harness, tmp_path: Path) -> None:
    await setup(h, tmp_path, concurrency="Skip")
    result = await h.engine.triggers.backfill(
        "default",
        "load",
        BackfillRequest(schedule="nightly", start=utc(2026, 1, 1), end=utc(2026, 1, 4)),
    )
    assert (result.created, result.refused) == (1, 2)
    assert [w.problems[0].code for w in result.windows[1:]] == ["run.concurrency.skipped"] * 2


async def test_refusals_and_dry_run(h: Harness, tmp_path: Path) -> None:
    await setup(h, tmp_path)
    with pytest.raises(ProblemsError) as too_many:
        await h.engine.triggers.backfill(
            "default",
            "load",
            BackfillRequest(schedule="nightly", start=utc(2026, 1, 1), end=utc(2027, 1, 1)),
        )
    [p] = too_many.value.problems
    assert p.code == "backfill.too_many" and "365 runs" in p.message and "200" in p.message
    with pytest.raises(ProblemsError) as once:
        await h.engine.triggers.backfill(
            "default",
            "load",
            BackfillRequest(schedule="once", start=utc(2026, 1, 1), end=utc(2026, 2, 1)),
        )
    assert once.value.problems[0].code == "backfill.schedule.one_time"
    with pytest.raises(ProblemsError) as ghost:
        await h.engine.triggers.backfill(
            "default",
            "load",
            BackfillRequest(schedule="ghost", start=utc(2026, 1, 1), end=utc(2026, 2, 1)),
        )
    assert ghost.value.problems[0].code == "backfill.schedule.not_found"
    with pytest.raises(ProblemsError) as backwards:
        await h.engine.triggers.backfill(
            "default",
            "load",
            BackfillRequest(schedule="nightly", start=utc(2026, 2, 1), end=utc(2026, 1, 1)),
        )
    assert backwards.value.problems[0].code == "backfill.range.invalid"
    planned = await h.engine.triggers.backfill(
        "default",
        "load",
        BackfillRequest(
            schedule="nightly", start=utc(2026, 1, 1), end=utc(2026, 1, 11), dry_run=True
        ),
    )
    assert planned.dry_run and planned.created == 10 and len(planned.windows) == 10
    assert await h.fetchval("SELECT count(*) FROM runs") == 0
