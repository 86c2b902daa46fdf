"""Counting a fan-out's items without its run's lock, then finishing the step they complete.

Every outcome transaction locks its runs first (``store.progress``), and a wide fan-out is
one run: every worker's batch of its items queued behind that one row, held over the
holder's round trips and its wait for a CPU, so a fan-out went slower with four workers than
with two. But an item's outcome that neither retries nor ends its step changes no run or
step state: it records its attempt and its item and adds to its step's counters. So such a
batch is counted by one statement in autocommit (``count``: ``outcomes.RECORD`` itself,
which locks the attempts in id order, then the items, then the step's counter row, the
order every writer takes them), and the step's counter row is held only while PostgreSQL
runs that statement.

The batch whose counts end a step (every item counted, or a FailFast item failed) then
finishes it in a second transaction that takes the run's lock first, re-reading the
counters under it (``finish_counted``). A crash between the two commits leaves a running
step whose counters say it is done; the sweeper finds those by a partial index of running
fan-outs (``counted_unfinished``) and finishes them the same way, so nothing waits on the
process that died.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from dirigent.engine.shapes.attempts import Outcome
from dirigent.engine.shapes.statuses import WorkStatus
from dirigent.engine.store.transactions.outcomes import (
    advance,
    counted_outcome,
    finish_fan_outs,
    lock_queue_pipelines,
    lock_runs,
    record,
)
from dirigent.engine.store.transactions.versions import VersionCache

StepKey = tuple[int, int, str]  # run id, version id, step


async def count(
    conn: asyncpg.Connection, outcomes: list[Outcome], worker_id: str
) -> tuple[set[int], list[dict[str, Any]]]:
    """Record item outcomes that do not retry, in autocommit (the caller opens no transaction).

    Returns the attempts recorded (one no longer held is left alone) and the counters of
    every step they counted on.
    """
    assert not conn.is_in_transaction(), "counted in autocommit: the step row is held only here"
    rec = await record(conn, outcomes, worker_id, retrying=set(), lock_runs=False)
    versions = {o.attempt.run_id: o.attempt.version_id for o in outcomes}
    return rec.accepted, [c | {"version_id": versions[c["run_id"]]} for c in rec.counters]


async def ended(
    conn: asyncpg.Connection, counters: list[dict[str, Any]], versions: VersionCache
) -> list[StepKey]:
    """The steps whose counters end them (read from a count, or by the sweeper)."""
    out: list[StepKey] = []
    for row in counters:
        status, _ = counted_outcome(await versions.get(conn, row["version_id"]), row)
        if status is not None:
            out.append((row["run_id"], row["version_id"], row["step"]))
    return out


async def finish_counted(
    conn: asyncpg.Connection, steps: list[StepKey], versions: VersionCache
) -> dict[int, str]:
    """Finish steps their counters end, and advance their runs; returns the runs finished.

    In the caller's transaction, with the locks in the global order: Queue pipelines, runs,
    then the counters read again under them, so a step finished meanwhile
    (by another worker's batch, or a sweeper) is not finished twice; ``advance`` notes the
    runs' progress.
    """
    if not steps:
        return {}
    await lock_queue_pipelines(conn, {(r, v) for r, v, _ in steps}, versions)
    locked = await lock_runs(conn, sorted({r for r, _, _ in steps}))
    rows = await conn.fetch(
        f"""SELECT s.run_id, s.step, s.items, s.items_succeeded, s.items_failed,
                   s.items_skipped, s.items_cancelled
            FROM run_steps s JOIN unnest($1::bigint[], $2::text[]) AS t(run_id, step)
                 ON s.run_id = t.run_id AND s.step = t.step
            WHERE s.status = '{WorkStatus.RUNNING}'""",
        [r for r, _, _ in steps],
        [s for _, _, s in steps],
    )
    terminal = await finish_fan_outs(conn, [dict(r) for r in rows], locked, versions)
    advanced = await advance(conn, terminal, locked, versions)
    return {r: a.run_status for r, a in advanced.items() if a.run_status is not None}


# Read through ``ix_run_steps_running_fan_outs``: live fan-outs only, whatever the history.
COUNTED_UNFINISHED = f"""
SELECT s.run_id, r.version_id, s.step, s.items, s.items_succeeded, s.items_failed,
       s.items_skipped, s.items_cancelled
FROM run_steps s JOIN runs r ON r.id = s.run_id
WHERE s.status = '{WorkStatus.RUNNING}' AND s.items IS NOT NULL
  AND (s.items_failed > 0
       OR s.items_succeeded + s.items_failed + s.items_skipped + s.items_cancelled >= s.items)
"""


async def counted_unfinished(conn: asyncpg.Connection) -> list[dict[str, Any]]:
    """Running fan-out steps whose counters may end them: what a crash between a count and
    its finishing leaves (and, for a moment, a count whose finishing is under way)."""
    return [dict(r) for r in await conn.fetch(COUNTED_UNFINISHED)]
