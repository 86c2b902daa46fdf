"""The outcome transaction (``store.outcomes.record_many``): its lock order and its writes
to the run rows.

A batch locks its runs before its attempts (the order every writer takes them, so two
batches never deadlock), in the statement that records it. Each run it locked notes its
progress exactly once: a second update of a row the same transaction already wrote makes
PostgreSQL re-check the row's foreign keys (a lookup and a share lock of its pipeline and
its version, rows every worker's batch then writes).

A test of the store's ``transactions.outcomes`` (and ``claims``) itself: it calls them below
the door, on connections of its own, to hold the rows whose lock order it checks.
"""

from __future__ import annotations

import asyncio
import datetime as dt

import asyncpg
import pytest

from dirigent.engine.shapes.attempts import Claimed, Outcome
from dirigent.engine.store.pool import connect
from dirigent.engine.store.transactions import claims
from dirigent.engine.store.transactions.outcomes import record_many
from tests.support.harness import Harness
from tests.support.waiting import eventually

PIPELINES = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: %s}
spec:
  steps:
%s
"""
PAIR = "    a: {block: core.noop}\n    b: {block: core.noop, dependsOn: [a]}"
ONE = "    a: {block: core.noop}"
WIDE = "    a: {block: core.noop}\n    b: {block: core.noop}"


async def _claim_all(h: Harness) -> list[Claimed]:
    async with h.pool.acquire() as conn:
        return await claims.claim(conn, "w", limit=50, tags=[], lease=dt.timedelta(minutes=5))


async def test_a_batch_locks_its_runs_before_its_attempts(h: Harness) -> None:
    """With one of its attempt rows held elsewhere, a batch waits for it holding its run
    row already: the runs come first in the one global lock order."""
    await h.apply(PIPELINES % ("one", ONE))
    run = await h.run("one")
    [held] = await _claim_all(h)
    holder, writer = await connect(h.url), await connect(h.url)
    try:
        tx = holder.transaction()
        await tx.start()
        await holder.execute("SELECT 1 FROM step_attempts WHERE id = $1 FOR UPDATE", held.id)

        async def finish() -> None:
            async with writer.transaction():
                await record_many(writer, [Outcome(held, "w", "succeeded", output={})], h.versions)

        finishing = asyncio.create_task(finish())
        pid = writer.get_server_pid()
        await eventually(
            lambda: h.fetchval("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", pid),
            lambda waiting: waiting == "Lock",
            what="the batch waiting for its attempt row",
        )
        with pytest.raises(asyncpg.LockNotAvailableError):  # the run row is held already
            async with h.pool.acquire() as conn, conn.transaction():
                await conn.execute(
                    "SELECT 1 FROM runs WHERE id = $1 FOR NO KEY UPDATE NOWAIT", run.run_id
                )
        await tx.rollback()
        await finishing
    finally:
        await holder.close()
        await writer.close()
    assert await h.status(run.run_id) == "succeeded"


async def test_every_run_of_a_batch_notes_its_progress_with_one_update(h: Harness) -> None:
    """Three runs in one batch: one whose next step queues, one that records, one whose
    other step is still running. Each was stuck; each is no longer, its progress noted,
    and each run row was updated once (not a lock-and-update and then another)."""
    for name, steps in (("pair", PAIR), ("one", ONE), ("wide", WIDE)):
        await h.apply(PIPELINES % (name, steps))
    runs = {name: (await h.run(name)).run_id for name in ("pair", "one", "wide")}
    await h.execute(
        "UPDATE runs SET stuck_at = now(), last_progress_at = now() - interval '2 hours'"
    )
    held = await _claim_all(h)
    by_run = {(a.run_id, a.step): a for a in held}
    batch = [by_run[(runs["pair"], "a")], by_run[(runs["one"], "a")], by_run[(runs["wide"], "a")]]
    async with h.pool.acquire() as conn, conn.transaction():
        before = await conn.fetchval("SELECT pg_stat_get_xact_tuples_updated('runs'::regclass)")
        finished = await record_many(
            conn, [Outcome(a, "w", "succeeded", output={}) for a in batch], h.versions
        )
        updated = await conn.fetchval("SELECT pg_stat_get_xact_tuples_updated('runs'::regclass)")
    assert [s.run_status for s in finished] == [None, "succeeded", None]
    assert updated - before == 3
    rows = await h.pool.fetch(
        """SELECT id, stuck_at IS NULL AS unstuck, last_progress_at > now() - interval '1 minute'
                  AS noted
           FROM runs ORDER BY id"""
    )
    assert [(r["id"], r["unstuck"], r["noted"]) for r in rows] == [
        (runs[name], True, True) for name in ("pair", "one", "wide")
    ]
    assert await h.steps(runs["pair"]) == {"a": "succeeded", "b": "running"}
    assert await h.steps(runs["wide"]) == {"a": "succeeded", "b": "running"}
