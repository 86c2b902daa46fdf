"""Engine events: reading the transitions the triggers of migration 0004 record.

Ids are handed out when a row is inserted, not when its transaction commits, so "every event
after id N" could skip one that commits late. Events are therefore read in (xid, id) order
and only from transactions older than every transaction still open
(``pg_snapshot_xmin``): below that line the set of events can no longer change, and a cursor
(xid, id) never skips or repeats one.
"""

from __future__ import annotations

import asyncpg

from dirigent.engine.shapes.views import EngineEvent, encode_cursor

EVENTS_CHANNEL = "dirigent_events"


async def events_after(
    conn: asyncpg.Connection,
    *,
    after: tuple[int, int],
    namespace: str | None,
    run_id: int | None,
    limit: int,
) -> list[EngineEvent]:
    """Finished events after the (xid, id) position, oldest first."""
    rows = await conn.fetch(
        """SELECT id, xid::text::bigint AS xid, at, namespace, run_id, entity, entity_id, step,
                  item_index, number, status, previous
           FROM engine_events
           WHERE (xid, id) > ($1::text::xid8, $2::bigint)
             AND xid < pg_snapshot_xmin(pg_current_snapshot())
             AND ($3::text IS NULL OR namespace = $3)
             AND ($4::bigint IS NULL OR run_id = $4)
           ORDER BY xid, id LIMIT $5""",
        str(after[0]),
        after[1],
        namespace,
        run_id,
        limit,
    )
    return [
        EngineEvent.model_validate({**dict(r), "cursor": encode_cursor(r["xid"], r["id"])})
        for r in rows
    ]


async def latest_position(conn: asyncpg.Connection) -> tuple[int, int]:
    """Where a subscription that wants only new events starts: just below every open transaction.

    It may repeat a transition that committed a moment before the subscription; it never
    misses one that commits after.
    """
    xmin = await conn.fetchval("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint")
    return int(xmin) - 1, 2**63 - 1
