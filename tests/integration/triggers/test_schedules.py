"""Schedules through the engine door: apply, fire under a controlled clock, history, status."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
from pathlib import Path

import pytest

from dirigent.engine import ProblemsError
from tests.support.harness import Harness
from tests.support.waiting import eventually

PIPELINE = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: {name}}}
spec:
  concurrency: {concurrency}
  params:
    type: object
    properties:
      region: {{type: string, enum: [north, south]}}
    additionalProperties: false
  steps:
    a: {{block: testing.record, config: {{path: {path}}}}}
"""

SCHEDULE = """
apiVersion: dirigent.dev/v1alpha1
kind: Schedule
metadata: {{name: {name}}}
spec:
  pipeline: {pipeline}
  {clock}
  timezone: {tz}
  params: {{region: north}}
"""


class Clock:
    """A clock the test moves: real now plus an offset it controls."""

    def __init__(self) -> None:
        self.offset = dt.timedelta(0)

    def __call__(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC) + self.offset


async def setup(
    h: Harness,
    tmp_path: Path,
    clock: str = "cron: '0 5 * * *'",
    tz: str = "UTC",
    concurrency: str = "Allow",
    name: str = "nightly",
) -> None:
    await h.apply(PIPELINE.format(name="load", path=tmp_path / "rec", concurrency=concurrency))
    await h.apply(SCHEDULE.format(name=name, pipeline="load", clock=clock, tz=tz))


async def test_apply_computes_next_fire_at_in_the_schedules_zone(
    h: Harness, tmp_path: Path
) -> None:
    await setup(h, tmp_path, tz="Europe/Oslo")
    view = await h.engine.triggers.schedule("default", "nightly")
    assert view is not None and view.next_fire_at is not None and not view.paused
    local = view.next_fire_at.astimezone(__import__("zoneinfo").ZoneInfo("Europe/Oslo"))
    assert (local.hour, local.minute) == (5, 0)
    assert view.next_fire_at > dt.datetime.now(dt.UTC)
    again = await h.apply(
        SCHEDULE.format(
            name="nightly", pipeline="load", clock="cron: '0 5 * * *'", tz="Europe/Oslo"
        )
    )
    assert again.action == "unchanged"


async def test_apply_refusals_are_located(h: Harness, tmp_path: Path) -> None:
    with pytest.raises(ProblemsError) as missing:
        await h.apply(SCHEDULE.format(name="s", pipeline="ghost", clock="interval: 1s", tz="UTC"))
    assert [(p.code, p.location) for p in missing.value.problems] == [
        ("trigger.pipeline.not_found", "spec.pipeline")
    ]
    await h.apply(PIPELINE.format(name="load", path=tmp_path / "rec", concurrency="Allow"))
    bad = SCHEDULE.format(name="s", pipeline="load", clock="interval: 1s", tz="UTC").replace(
        "north", "west"
    )
    with pytest.raises(ProblemsError) as invalid:
        await h.apply(bad)
    assert [(p.code, p.location) for p in invalid.value.problems] == [
        ("schedule.params.invalid", "spec.params.region")
    ]
    assert await h.fetchval("SELECT count(*) FROM schedules") == 0


async def test_firing_creates_the_run_with_its_window_and_advances_the_clock(
    h: Harness, tmp_path: Path
) -> None:
    await setup(h, tmp_path, clock="cron: '*/10 * * * *'")
    clock = Clock()
    scheduler = h.engine.triggers.scheduler(clock=clock)
    owed = (await h.engine.triggers.schedule("default", "nightly")).next_fire_at  # type: ignore[union-attr]
    assert owed is not None
    assert await scheduler.tick() == []  # nothing due yet
    clock.offset = owed - dt.datetime.now(dt.UTC) + dt.timedelta(minutes=2)  # 2 min late
    [fired] = await scheduler.tick()
    assert fired.ok and not fired.firing.misfire
    run = await h.engine.runs.get("default", fired.run_id)  # type: ignore[arg-type]
    assert run is not None
    row = await h.fetchval(
        "SELECT row(triggered_by_kind, triggered_by_ref, window_start, window_end, params::text) "
        "FROM runs WHERE id = $1",
        fired.run_id,
    )
    assert row[0:2] == ("schedule", "nightly")
    assert (row[2], row[3]) == (owed - dt.timedelta(minutes=10), owed)
    assert row[4] == '{"region": "north"}'
    view = await h.engine.triggers.schedule("default", "nightly")
    assert view is not None
    assert view.next_fire_at == owed + dt.timedelta(minutes=10)  # the grid is kept
    assert view.last_run_id == fired.run_id and view.last_error is None
    [history] = await h.engine.triggers.firings("default", "nightly")
    assert (history.result, history.run_id, history.scheduled_for) == ("fired", fired.run_id, owed)
    assert await scheduler.tick() == []  # the same slot never fires twice


async def test_misfire_fires_once_and_recomputes_from_now(h: Harness, tmp_path: Path) -> None:
    await setup(h, tmp_path, clock="cron: '* * * * *'")
    clock = Clock()
    clock.offset = dt.timedelta(hours=30)  # the scheduler was down for a day and more
    scheduler = h.engine.triggers.scheduler(clock=clock)
    fired = await scheduler.tick()
    assert len(fired) == 1 and fired[0].firing.misfire
    view = await h.engine.triggers.schedule("default", "nightly")
    assert view is not None and view.next_fire_at is not None
    assert view.next_fire_at > clock() - dt.timedelta(seconds=1)
    assert await h.fetchval("SELECT count(*) FROM runs") == 1
    [history] = await h.engine.triggers.firings("default", "nightly")
    assert history.misfire
    assert scheduler.metrics.misfires._value.get() == 1


async def test_failed_firings_are_recorded_with_their_message(h: Harness, tmp_path: Path) -> None:
    await setup(h, tmp_path, clock="interval: 1h", concurrency="Skip")
    clock = Clock()
    scheduler = h.engine.triggers.scheduler(clock=clock)
    clock.offset = dt.timedelta(hours=1, seconds=1)
    [first] = await scheduler.tick()
    assert first.ok
    clock.offset = dt.timedelta(hours=2, seconds=2)
    [second] = await scheduler.tick()  # the first run is still in flight: Skip refuses
    assert not second.ok and "concurrency: Skip" in (second.message or "")
    # A pin that no longer validates: the pipeline changes under the schedule.
    await h.apply(
        PIPELINE.format(name="load", path=tmp_path / "rec", concurrency="Allow").replace(
            "enum: [north, south]", "enum: [east]"
        )
    )
    clock.offset = dt.timedelta(hours=3, seconds=3)
    [third] = await scheduler.tick()
    assert not third.ok and "region" in (third.message or "")
    history = await h.engine.triggers.firings("default", "nightly")
    assert [f.result for f in history] == ["failed", "failed", "fired"]
    assert all(f.message for f in history[:2])
    view = await h.engine.triggers.schedule("default", "nightly")
    assert view is not None and view.last_error == third.message
    assert view.last_run_id == first.run_id
    assert scheduler.metrics.firings.labels("failed")._value.get() == 2


async def test_one_time_schedule_fires_once_then_pauses_itself(h: Harness, tmp_path: Path) -> None:
    when = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)).replace(microsecond=0)
    await setup(h, tmp_path, clock=f"at: '{when.isoformat()}'")
    clock = Clock()
    scheduler = h.engine.triggers.scheduler(clock=clock)
    clock.offset = dt.timedelta(hours=2, seconds=5)
    [fired] = await scheduler.tick()
    assert fired.ok and fired.firing.window is None
    view = await h.engine.triggers.schedule("default", "nightly")
    assert view is not None and view.paused and view.next_fire_at is None
    clock.offset = dt.timedelta(days=3)
    assert await scheduler.tick() == []
    window = await h.fetchval("SELECT window_start FROM runs WHERE id = $1", fired.run_id)
    assert window is None


async def test_pause_and_resume_recompute_from_now(h: Harness, tmp_path: Path) -> None:
    await setup(h, tmp_path, clock="interval: 1h")
    assert await h.engine.triggers.set_schedule_paused("default", "nightly", True)
    view = await h.engine.triggers.schedule("default", "nightly")
    assert view is not None and view.paused and view.next_fire_at is None
    before = dt.datetime.now(dt.UTC)
    assert await h.engine.triggers.set_schedule_paused("default", "nightly", False)
    view = await h.engine.triggers.schedule("default", "nightly")
    assert view is not None and not view.paused and view.next_fire_at is not None
    assert view.next_fire_at >= before + dt.timedelta(hours=1)
    # Through the manifest too: paused: true in the spec.
    paused = SCHEDULE.format(name="nightly", pipeline="load", clock="interval: 1h", tz="UTC")
    await h.apply(paused + "  paused: true\n")
    view = await h.engine.triggers.schedule("default", "nightly")
    assert view is not None and view.paused and view.next_fire_at is None
    assert not await h.engine.triggers.set_schedule_paused("default", "ghost", True)


async def test_a_changed_param_keeps_the_clock_a_changed_cadence_recomputes(
    h: Harness, tmp_path: Path
) -> None:
    await setup(h, tmp_path, clock="cron: '0 5 * * *'")
    first = (await h.engine.triggers.schedule("default", "nightly")).next_fire_at  # type: ignore[union-attr]
    text = SCHEDULE.format(name="nightly", pipeline="load", clock="cron: '0 5 * * *'", tz="UTC")
    assert (await h.apply(text.replace("north", "south"))).action == "updated"
    assert (await h.engine.triggers.schedule("default", "nightly")).next_fire_at == first  # type: ignore[union-attr]
    await h.apply(text.replace("0 5 * * *", "0 6 * * *"))
    changed = (await h.engine.triggers.schedule("default", "nightly")).next_fire_at  # type: ignore[union-attr]
    assert changed is not None and changed.hour == 6


async def test_delete_takes_the_schedule_and_its_history(h: Harness, tmp_path: Path) -> None:
    await setup(h, tmp_path, clock="interval: 1h")
    clock = Clock()
    clock.offset = dt.timedelta(hours=1, seconds=1)
    await h.engine.triggers.scheduler(clock=clock).tick()
    deleted = await h.engine.manifests.delete("Schedule", "default", "nightly")
    assert deleted.found
    assert await h.fetchval("SELECT count(*) FROM schedule_firings") == 0
    assert await h.fetchval("SELECT count(*) FROM runs") == 1  # runs stay
    assert not (await h.engine.manifests.delete("Schedule", "default", "nightly")).found


async def test_a_one_second_interval_fires_for_real(h: Harness, tmp_path: Path) -> None:
    await setup(h, tmp_path, clock="interval: 1s")
    scheduler = h.engine.triggers.scheduler(tick=0.2)
    task = asyncio.create_task(scheduler.run())
    try:
        await eventually(
            lambda: h.fetchval("SELECT count(*) FROM runs"),
            lambda n: n >= 3,
            timeout=15,
            what="3 firings",
        )
        assert scheduler.is_leader
    finally:
        scheduler.stop()
        await task
    slots = await h.fetchval("SELECT array_agg(scheduled_for ORDER BY id) FROM schedule_firings")
    assert all(b - a == dt.timedelta(seconds=1) for a, b in itertools.pairwise(slots))
    ends = await h.fetchval("SELECT array_agg(window_end ORDER BY id) FROM runs")
    assert ends == slots[: len(ends)]


async def test_a_second_scheduler_waits_for_the_lock(h: Harness, tmp_path: Path) -> None:
    await setup(h, tmp_path, clock="interval: 1h")
    first, second = h.engine.triggers.scheduler(tick=0.05), h.engine.triggers.scheduler(tick=0.05)
    tasks = [asyncio.create_task(first.run())]
    try:
        await eventually(lambda: first.is_leader, timeout=10, every=0.02, what="the first leading")
        tasks.append(asyncio.create_task(second.run()))
        # Wait until the second has asked for the lock and been refused: a scheduler session
        # whose last statement was the try-lock, now idle, holding no advisory lock.
        await eventually(
            lambda: h.fetchval(REFUSED_SESSIONS), lambda n: n >= 1, what="a refused try-lock"
        )
        assert not second.is_leader
        first.stop()
        await tasks[0]
        await eventually(
            lambda: second.is_leader, timeout=10, every=0.02, what="the second leading"
        )
    finally:
        first.stop()
        second.stop()
        await asyncio.gather(*tasks)


REFUSED_SESSIONS = """
SELECT count(*) FROM pg_stat_activity a
WHERE a.application_name LIKE 'dirigent-scheduler:%' AND a.state = 'idle'
  AND a.query LIKE '%pg_try_advisory_lock%'
  AND NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'advisory')
"""
