"""Claims: taking due attempts with a lease, keeping the lease, and knowing when to look again.

The claim is one statement: ``FOR UPDATE SKIP LOCKED`` over the due rows, ordered by
priority, then fairness between runs (``fair_seq``: an attempt's position among its run's
queued work, so a 400-item fan-out and a two-step run interleave), then due time, then id.
Every predicate that decides claimability sits on the locked ``step_attempts`` relation
itself, because when SKIP LOCKED waits out a concurrent commit it re-checks only those.

Waiting work (a sensor's poke, a remote job's probe) falls due at a time of its own, so it
has a reserved share: half of the free slots (at least one) go to due polls first, queued
work takes the rest, and any slot still free goes to further polls. A 10,000-item fan-out
therefore never holds a probe past its due time by more than one claim; a poll cannot
starve queued work either, since it only takes slots its due rows need. No row is locked
that the statement does not claim.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import asyncpg

from dirigent.engine.shapes.attempts import Claimed
from dirigent.engine.store.leases import ATTEMPTS

CLAIM = f"""
WITH polls AS (
    SELECT id FROM step_attempts
    WHERE status = 'waiting' AND next_poll_at <= now() AND requires_workers <@ $3::jsonb
    ORDER BY next_poll_at, id
    LIMIT greatest(1, $2 / 2) FOR UPDATE SKIP LOCKED
),
queued AS (SELECT claimable_queued($2 - (SELECT count(*) FROM polls), $3::jsonb) AS id),
more_polls AS (
    SELECT id FROM step_attempts
    WHERE status = 'waiting' AND next_poll_at <= now() AND requires_workers <@ $3::jsonb
      AND id NOT IN (SELECT id FROM polls)
    ORDER BY next_poll_at, id
    LIMIT $2 - (SELECT count(*) FROM polls) - (SELECT count(*) FROM queued) FOR UPDATE SKIP LOCKED
),
claimed AS (
    UPDATE step_attempts a
    SET status = 'running', {ATTEMPTS.take("$1", "$4")},
        started_at = now(), first_started_at = COALESCE(a.first_started_at, now())
    WHERE a.id = ANY(ARRAY(SELECT id FROM polls UNION ALL SELECT id FROM queued
                           UNION ALL SELECT id FROM more_polls))
    RETURNING a.id, a.run_id, a.run_item_id, a.step, a.item_index, a.number, a.kind, a.block,
              a.first_started_at, a.cursor, a.handle, a.fetched, a.wait_message, a.gone_count,
              a.available_at, a.next_poll_at, a.probe_errors
)
SELECT c.*, r.params, r.version_id, r.window_start, r.window_end, r.namespace,
       (SELECT p.name FROM pipelines p WHERE p.id = r.pipeline_id) AS pipeline,
       (SELECT i.value FROM run_items i WHERE i.id = c.run_item_id) AS item_value
FROM claimed c
JOIN runs r ON r.id = c.run_id
"""


LOAD = """
SELECT c.*, r.params, r.version_id, r.window_start, r.window_end, r.namespace, p.name AS pipeline,
       i.value AS item_value
FROM step_attempts c
JOIN runs r ON r.id = c.run_id
JOIN pipelines p ON p.id = r.pipeline_id
LEFT JOIN run_items i ON i.id = c.run_item_id
WHERE c.id = ANY($1)
"""


async def claim(
    conn: asyncpg.Connection, worker_id: str, *, limit: int, tags: list[str], lease: timedelta
) -> list[Claimed]:
    return _claimed(await conn.fetch(CLAIM, worker_id, limit, tags, lease))


async def load(conn: asyncpg.Connection, ids: list[int]) -> list[Claimed]:
    """Attempts as a worker would hold them: how the sweeper records one it takes over."""
    return _claimed(await conn.fetch(LOAD, ids))


def _claimed(rows: list[asyncpg.Record]) -> list[Claimed]:
    out: list[Claimed] = []
    for r in rows:
        window = (r["window_start"], r["window_end"]) if r["window_start"] is not None else None
        due = (
            r["next_poll_at"]
            if r["handle"] is not None or r["cursor"] is not None
            else r["available_at"]
        )
        out.append(
            Claimed(
                id=r["id"],
                run_id=r["run_id"],
                run_item_id=r["run_item_id"],
                step=r["step"],
                item_index=r["item_index"],
                number=r["number"],
                kind=r["kind"],
                block=r["block"],
                first_started_at=r["first_started_at"],
                cursor=r["cursor"],
                handle=r["handle"],
                fetched=r["fetched"],
                wait_message=r["wait_message"],
                gone_count=r["gone_count"],
                due_at=due or r["available_at"],
                params=r["params"],
                version_id=r["version_id"],
                window=window,
                namespace=r["namespace"],
                pipeline=r["pipeline"],
                item_value=r["item_value"],
                probe_errors=r["probe_errors"],
            )
        )
    return out


async def heartbeat(
    conn: asyncpg.Connection, worker_id: str, ids: list[int], lease: timedelta
) -> set[int]:
    """Extend the leases this worker holds; returns the ids it still holds (others were cancelled)."""
    if not ids:
        return set()
    rows = await conn.fetch(
        # Rows locked in id order, as every writer locks them (``outcomes.lock_batch``): a
        # heartbeat and its own worker's writer never wait on each other in a cycle.
        f"""WITH l AS (SELECT id FROM step_attempts
                      WHERE id = ANY($2) AND {ATTEMPTS.held_by("$1")} AND status = 'running'
                      ORDER BY id FOR NO KEY UPDATE)
           UPDATE step_attempts a SET {ATTEMPTS.renew("$3")}
           FROM l WHERE a.id = l.id RETURNING a.id""",
        worker_id,
        ids,
        lease,
    )
    return {r["id"] for r in rows}


async def lock_attempts(conn: asyncpg.Connection, ids: list[int]) -> None:
    """Lock attempt rows in id order, as every writer and the heartbeat take them: what a
    batch of parkings needs before its one ``UPDATE`` (no run row: parking changes no run)."""
    await conn.execute(
        "SELECT 1 FROM step_attempts WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE",
        sorted(ids),
    )


async def next_due(conn: asyncpg.Connection) -> datetime | None:
    """When the next waiting attempt falls due (an indexed lookup): how long an idle worker may sleep.

    A poll falling due sends no NOTIFY, so without this an idle worker would probe up to one
    poll interval late. Only future due times count: one already overdue that the claim did
    not take is held by another worker or needs another tag. Delayed retries still rely on
    the poll interval.
    """
    due: datetime | None = await conn.fetchval(
        "SELECT min(next_poll_at) FROM step_attempts WHERE status = 'waiting' AND next_poll_at > now()"
    )
    return due


async def levels(conn: asyncpg.Connection) -> tuple[int, int]:
    """(queued and due now, waiting): the two levels an operator watches; for the sweeper only."""
    row = await conn.fetchrow(
        """SELECT (SELECT count(*) FROM step_attempts WHERE status = 'queued' AND available_at <= now()),
                  (SELECT count(*) FROM step_attempts WHERE status = 'waiting')"""
    )
    return int(row[0]), int(row[1])
