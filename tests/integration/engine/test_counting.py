"""A fan-out's items are counted without its run's lock; the step they end is finished after.

``store/counting.py``: a batch of item outcomes that do not retry is one statement in
autocommit, so workers counting items of one wide fan-out never queue on its run row; the
batch that ends the step records it in a second transaction under the run lock, and the
sweeper records a step whose counting process died before that.

A test of the store's ``transactions.counting`` (and ``runtime.recording``) itself: it calls
them below the door, with claims and connections of its own, to stage the interleavings
(a row held, a worker gone between two transactions) no door can.
"""

from __future__ import annotations

import asyncio
import datetime as dt

import asyncpg
import pytest

from dirigent.engine.runtime import recording
from dirigent.engine.shapes.attempts import Outcome, Parking
from dirigent.engine.store.pool import Connection, connect
from dirigent.engine.store.transactions import claims, counting
from tests.support.harness import Harness, counter_drift
from tests.support.waiting import eventually

FAN_OUT = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: fan}
spec:
  steps:
    each: {block: core.noop, forEach: %s}
    after: {block: core.noop, dependsOn: [each]}
"""


async def counters(h: Harness, run_id: int) -> tuple[str, int]:
    row = await h.pool.fetchrow(
        "SELECT status, items_succeeded FROM run_steps WHERE run_id = $1 AND step = 'each'",
        run_id,
    )
    assert row is not None
    return row["status"], row["items_succeeded"]


async def test_items_are_counted_while_another_transaction_holds_their_run(h: Harness) -> None:
    """With the run row held, every item is still counted (the old outcome transaction
    waited for that row first, so none could be); only finishing the step waits for it."""
    await h.apply(FAN_OUT % list(range(40)))
    run = await h.run("fan")
    holder = await connect(h.url)
    try:
        tx = holder.transaction()
        await tx.start()
        await holder.execute("SELECT 1 FROM runs WHERE id = $1 FOR NO KEY UPDATE", run.run_id)
        async with h.workers(2, concurrency=4):
            counted = await eventually(
                lambda: counters(h, run.run_id),
                lambda c: c[1] == 40,
                what="all 40 items counted while the run row is held",
            )
            assert counted == ("running", 40)  # recording the step waits for the run row
            await tx.rollback()
            assert await h.until_finished(run.run_id) == "succeeded"
    finally:
        await holder.close()
    assert await h.steps(run.run_id) == {"each": "succeeded", "after": "succeeded"}
    assert await counter_drift(h) == []


async def test_the_step_counter_is_locked_only_after_the_rest_is_written(h: Harness) -> None:
    """Every worker counting a fan-out writes its step's one counter row, so the count takes
    that row last: a count waiting for it has already written its items (whose rows it
    holds), rather than holding the counter while it writes them."""
    await h.apply(FAN_OUT % [0, 1])
    run = await h.run("fan")
    async with h.pool.acquire() as conn:
        held = await claims.claim(conn, "w", limit=2, tags=[], lease=dt.timedelta(minutes=5))
    holder, counter = await connect(h.url), await connect(h.url)
    try:
        tx = holder.transaction()
        await tx.start()
        await holder.execute(
            "SELECT 1 FROM run_steps WHERE run_id = $1 AND step = 'each' FOR UPDATE", run.run_id
        )
        outcomes = [Outcome(a, "w", "succeeded", output={}) for a in held]
        counting_task = asyncio.create_task(counting.count(counter, outcomes, "w"))
        pid = counter.get_server_pid()
        await eventually(
            lambda: h.fetchval("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", pid),
            lambda waiting: waiting == "Lock",
            what="the count waiting for the step's counter row",
        )
        item = held[0].run_item_id
        with pytest.raises(asyncpg.LockNotAvailableError):  # written already: its row is held
            async with h.pool.acquire() as conn, conn.transaction():
                await conn.execute("SELECT 1 FROM run_items WHERE id = $1 FOR UPDATE NOWAIT", item)
        await tx.rollback()
        accepted, _ = await counting_task
    finally:
        await holder.close()
        await counter.close()
    assert accepted == {a.id for a in held}
    assert await counters(h, run.run_id) == ("running", 2)


async def test_a_step_counted_but_never_finished_is_finished_by_the_sweeper(h: Harness) -> None:
    """A worker that dies between counting the last items and recording their step leaves
    the step running with its counters full; a sweeper pass records it and the run goes on."""
    await h.apply(FAN_OUT % list(range(6)))
    run = await h.run("fan")
    async with h.pool.acquire() as conn:
        held = await claims.claim(conn, "gone", limit=6, tags=[], lease=dt.timedelta(minutes=5))
    assert len(held) == 6
    async with h.pool.acquire() as conn:  # counted; the recording never happens
        accepted, _ = await counting.count(
            conn, [Outcome(a, "gone", "succeeded", output={}) for a in held], "gone"
        )
    assert accepted == {a.id for a in held}
    assert await counters(h, run.run_id) == ("running", 6)

    worker = h.worker()
    passed = await worker.sweep()
    assert passed["fan_outs_finished"] == [run.run_id]
    assert (await counters(h, run.run_id))[0] == "succeeded"
    assert (await h.steps(run.run_id))["after"] == "running"  # its attempt is queued
    assert (await worker.sweep())["fan_outs_finished"] == []  # finished once
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "succeeded"


async def test_counting_a_cancelled_item_writes_nothing(h: Harness) -> None:
    """An item cancelled under its worker is not counted: its attempt is no longer held."""
    await h.apply(FAN_OUT % [0, 1])
    run = await h.run("fan")
    async with h.pool.acquire() as conn:
        held = await claims.claim(conn, "w", limit=2, tags=[], lease=dt.timedelta(minutes=5))
    await h.engine.runs.cancel(h.namespace, run.run_id, reason="test")
    async with h.pool.acquire() as conn:
        accepted, counted = await counting.count(
            conn, [Outcome(a, "w", "succeeded", output={}) for a in held], "w"
        )
    assert (accepted, counted) == (set(), [])
    assert await h.status(run.run_id) == "cancelled"
    assert await counter_drift(h) == []


async def test_a_batch_its_count_took_whole_opens_no_transaction(h: Harness) -> None:
    # The writer's transaction is two round trips (BEGIN, COMMIT) even with nothing in it; a
    # worker whose whole batch was counted used to pay them on every batch of a fan-out.
    written: list[tuple[list[Outcome], list[Parking]]] = []

    async def write(_conn: Connection, outcomes: list[Outcome], parkings: list[Parking]) -> None:
        written.append((outcomes, parkings))

    assert await recording.record(h.pool, write, "w", [], []) == []
    assert written == []
