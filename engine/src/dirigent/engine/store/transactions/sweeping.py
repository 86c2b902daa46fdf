"""The sweeper's statements: every one safe in several sweepers at once.

The statements that take rows to act on — expired leases to recover, attempts past their
recovery bound, finished runs to prune — take them ``FOR UPDATE SKIP LOCKED``, so sweepers
never wait on each other or on a worker; the rest are idempotent updates and deletes. The
sweeper pass that calls them is ``runtime/sweeping.py``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, NamedTuple

import asyncpg

from dirigent.engine.shapes.statuses import RunStatus, WorkStatus
from dirigent.engine.store.leases import ATTEMPTS
from dirigent.engine.store.named import named
from dirigent.engine.store.pool import affected
from dirigent.engine.store.transactions.logs import LogRow, write_logs
from dirigent.engine.store.transactions.progress import notify_work
from dirigent.engine.store.transactions.workers import GIVE_BACK


async def take_exhausted(
    conn: asyncpg.Connection,
    sweeper_id: str,
    max_recoveries: int,
    lease: timedelta,
    *,
    limit: int = 100,
) -> list[int]:
    """Expired attempts whose recovery would pass the bound: leased to the sweeper to fail.

    An attempt that keeps losing its lease (its worker dies on it, or cannot record it) must
    not run forever; the caller records these as failed under the sweeper's own lease.
    """
    rows = await conn.fetch(
        f"""
        WITH expired AS (
            SELECT id FROM step_attempts
            WHERE status = '{WorkStatus.RUNNING}' AND {ATTEMPTS.expired()} AND recoveries + 1 >= $2
            ORDER BY {ATTEMPTS.until} LIMIT $4 FOR UPDATE SKIP LOCKED
        )
        UPDATE step_attempts a
        SET {ATTEMPTS.take("$1", "$3")}, recoveries = a.recoveries + 1
        FROM expired WHERE a.id = expired.id
        RETURNING a.id
        """,
        sweeper_id,
        max_recoveries,
        lease,
        limit,
    )
    return [r["id"] for r in rows]


async def recover_expired(
    conn: asyncpg.Connection, *, max_recoveries: int = 5, limit: int = 500
) -> list[dict[str, Any]]:
    """Expired leases back to waiting (handle committed) or queued; safe with several sweepers.

    Each recovery is counted on the attempt; one past ``max_recoveries`` is left to
    ``take_exhausted``.
    """
    sql, args = named(
        f"""
        WITH expired AS (
            SELECT id FROM step_attempts
            WHERE status = '{WorkStatus.RUNNING}' AND {ATTEMPTS.expired()}
              AND recoveries + 1 < :max_recoveries
            ORDER BY {ATTEMPTS.until} LIMIT :limit FOR UPDATE SKIP LOCKED
        )
        UPDATE step_attempts a SET {GIVE_BACK}, recoveries = a.recoveries + 1
        FROM expired WHERE a.id = expired.id
        RETURNING a.id, a.run_id, a.step, a.status
        """,
        limit=limit,
        max_recoveries=max_recoveries,
        delay=timedelta(0),
    )
    rows = await conn.fetch(sql, *args)
    if rows:
        lines = [
            LogRow(
                r["run_id"],
                "warning",
                f"lease expired; recovered to {r['status']}",
                step=r["step"],
                attempt_id=r["id"],
            )
            for r in rows
        ]
        await write_logs(conn, lines)
        await notify_work(conn)
    return [dict(r) for r in rows]


async def stalled_queued_pipelines(conn: asyncpg.Connection) -> list[int]:
    """Pipelines with queued runs and none running: a promotion a lost race left undone."""
    rows = await conn.fetch(
        f"""SELECT DISTINCT pipeline_id FROM runs q WHERE q.status = '{RunStatus.QUEUED}'
           AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.pipeline_id = q.pipeline_id AND r.status = '{RunStatus.RUNNING}')"""
    )
    return [r["pipeline_id"] for r in rows]


async def detect_stuck(conn: asyncpg.Connection, stuck_for: timedelta) -> list[int]:
    """Running runs with no outcome and no attempt started for ``stuck_for``; flagged once."""
    rows = await conn.fetch(
        f"""
        UPDATE runs r SET stuck_at = now()
        WHERE r.status = '{RunStatus.RUNNING}' AND r.stuck_at IS NULL AND r.last_progress_at < now() - $1::interval
          AND NOT EXISTS (SELECT 1 FROM step_attempts a
                          WHERE a.run_id = r.id AND a.started_at > now() - $1::interval)
        RETURNING r.id
        """,
        stuck_for,
    )
    await write_logs(
        conn,
        [
            LogRow(r["id"], "warning", f"run stuck: no progress for {stuck_for}", {"stuck": True})
            for r in rows
        ],
    )
    return [r["id"] for r in rows]


# Oldest finished runs first, one bounded batch per sweep, found through the partial index
# ``ix_runs_finished_at_terminal`` (a range scan of one batch, whatever the history).
PRUNE_RUNS = f"""
DELETE FROM runs WHERE id IN (
    SELECT id FROM runs
    WHERE status IN ('{RunStatus.SUCCEEDED}', '{RunStatus.COMPLETED_WITH_ERRORS}', '{RunStatus.FAILED}', '{RunStatus.CANCELLED}')
      AND finished_at < now() - $1::interval
    ORDER BY finished_at LIMIT $2 FOR UPDATE SKIP LOCKED)
RETURNING id, namespace
"""


class PrunedRun(NamedTuple):
    """A deleted run: its id, and its namespace (where its scratch storage lies)."""

    id: int
    namespace: str


async def prune_runs(
    conn: asyncpg.Connection, older_than: timedelta, *, batch: int = 500
) -> list[PrunedRun]:
    """Delete up to ``batch`` finished runs, finished before the age (their rows cascade).

    Bounded so a purge of years of history never holds locks or a transaction for long: the
    sweeper takes one batch per pass, and claims go on between batches.
    """
    rows = await conn.fetch(PRUNE_RUNS, older_than, batch)
    return [PrunedRun(r["id"], r["namespace"]) for r in rows]


async def prune_logs(conn: asyncpg.Connection, older_than: timedelta, *, batch: int = 5000) -> int:
    status: str = await conn.execute(
        """DELETE FROM log_entries WHERE id IN (
               SELECT id FROM log_entries WHERE created_at < now() - $1::interval ORDER BY id LIMIT $2)""",
        older_than,
        batch,
    )
    return affected(status)


async def prune_deliveries(
    conn: asyncpg.Connection, older_than: timedelta, *, batch: int = 5000
) -> int:
    """Webhook deliveries received before the age, oldest first, one bounded batch a sweep
    (ids grow with time, so the primary key finds the oldest without a scan of the rest)."""
    status: str = await conn.execute(
        """DELETE FROM webhook_deliveries WHERE id IN (
               SELECT id FROM webhook_deliveries WHERE received_at < now() - $1::interval
               ORDER BY id LIMIT $2)""",
        older_than,
        batch,
    )
    return affected(status)
