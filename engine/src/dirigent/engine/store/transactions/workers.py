"""The workers registry, and giving an attempt back without an outcome.

An attempt given back without an outcome — recovered after its lease expired, handed back
by a worker that stops, released by a worker without its block — goes back the one way
``GIVE_BACK`` says, reading only its own row: to waiting when it holds a committed remote
handle or sensor cursor (probing continues; the work is never submitted twice), to the
queue otherwise.
"""

from __future__ import annotations

from datetime import timedelta

import asyncpg

from dirigent.engine.shapes.statuses import WorkStatus
from dirigent.engine.store.leases import ATTEMPTS
from dirigent.engine.store.named import named
from dirigent.engine.store.pool import affected
from dirigent.engine.store.transactions.logs import LogRow, write_logs
from dirigent.engine.store.transactions.progress import notify_work

# Give a held attempt back, as recovery does: to waiting when it holds a handle or a cursor
# (probing goes on; nothing is submitted twice), to the queue otherwise; due after ``:delay``.
GIVE_BACK = f"""status = CASE WHEN handle IS NOT NULL OR cursor IS NOT NULL
                   THEN '{WorkStatus.WAITING}' ELSE '{WorkStatus.QUEUED}' END,
    available_at = now() + :delay::interval, next_poll_at = now() + :delay::interval,
    {ATTEMPTS.release()}"""


async def register(
    conn: asyncpg.Connection,
    worker_id: str,
    *,
    hostname: str,
    version: str,
    plugins: list[str],
    tags: list[str],
    concurrency: int,
    blocks: list[str] | None = None,
) -> None:
    await conn.execute(
        """INSERT INTO workers (id, hostname, version, plugins, tags, concurrency, blocks, status)
           VALUES ($1, $2, $3, $4, $5, $6, $7, 'active')
           ON CONFLICT (id) DO UPDATE SET hostname = $2, version = $3, plugins = $4, tags = $5,
               concurrency = $6, blocks = $7, status = 'active', started_at = now(),
               last_seen_at = now()""",
        worker_id,
        hostname,
        version,
        plugins,
        tags,
        concurrency,
        blocks or [],
    )


async def release_unrunnable(
    conn: asyncpg.Connection,
    attempt_id: int,
    worker_id: str,
    *,
    block: str,
    reason: str,
    live_within: timedelta,
    grace: timedelta,
    delay: timedelta,
) -> bool:
    """Give back an attempt this worker cannot run, for a worker that can.

    Released while another live worker says it runs the block, or while the attempt is
    younger than ``grace`` (counted from its first claim: a worker that can may still be
    starting). Returns False when neither holds — no live worker can take it — and the
    caller then fails it. The attempt goes back as recovery would (waiting if it holds a
    handle or cursor) and falls due after ``delay``, so the releasing worker does not take
    it straight back.
    """
    sql, args = named(
        f"""WITH able AS (
               SELECT 1 FROM workers WHERE id <> :worker_id AND status = 'active'
                 AND last_seen_at > now() - :live_within::interval AND blocks ? :block LIMIT 1
           )
           UPDATE step_attempts SET {GIVE_BACK}
           WHERE id = :attempt_id AND {ATTEMPTS.held_by(":worker_id")} AND status = '{WorkStatus.RUNNING}'
             AND (EXISTS (SELECT 1 FROM able) OR first_started_at > now() - :grace::interval)
           RETURNING run_id, run_item_id, step""",
        attempt_id=attempt_id,
        worker_id=worker_id,
        block=block,
        live_within=live_within,
        grace=grace,
        delay=delay,
    )
    row = await conn.fetchrow(sql, *args)
    if row is not None:
        message = f"released by worker {worker_id}: {reason}"
        await write_logs(
            conn,
            [
                LogRow(
                    row["run_id"],
                    "warning",
                    message,
                    {"worker": worker_id},
                    step=row["step"],
                    attempt_id=attempt_id,
                    run_item_id=row["run_item_id"],
                )
            ],
        )
    if row is not None:
        await notify_work(conn)
    return row is not None


async def seen(conn: asyncpg.Connection, worker_id: str) -> None:
    await conn.execute("UPDATE workers SET last_seen_at = now() WHERE id = $1", worker_id)


async def stopped(conn: asyncpg.Connection, worker_id: str) -> None:
    await conn.execute(
        "UPDATE workers SET status = 'stopped', last_seen_at = now() WHERE id = $1", worker_id
    )


async def hand_back(conn: asyncpg.Connection, worker_id: str) -> int:
    """Give every lease this worker holds back, as recovery would, without waiting for expiry."""
    sql, args = named(
        f"""UPDATE step_attempts SET {GIVE_BACK}
           WHERE {ATTEMPTS.held_by(":worker_id")} AND status = '{WorkStatus.RUNNING}'""",
        worker_id=worker_id,
        delay=timedelta(0),
    )
    count = affected(await conn.execute(sql, *args))
    if count:
        await notify_work(conn)
    return count


async def mark_gone(conn: asyncpg.Connection, stale: timedelta) -> int:
    status: str = await conn.execute(
        "UPDATE workers SET status = 'gone' WHERE status = 'active' AND last_seen_at < now() - $1::interval",
        stale,
    )
    return affected(status)
