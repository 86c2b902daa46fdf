"""Leadership by a PostgreSQL session advisory lock (the scheduler's single leader).

The lock belongs to the session of one connection, so it is held exactly as long as that
connection lives: a leader that dies loses it when PostgreSQL sees the connection close.
"""

from __future__ import annotations

from dirigent.engine.store.pool import Connection


async def try_lead(conn: Connection, lock_id: int) -> bool:
    """Take the session lock ``lock_id`` on ``conn`` if nobody holds it; never waits."""
    return bool(await conn.fetchval("SELECT pg_try_advisory_lock($1)", lock_id))


async def still_connected(conn: Connection) -> None:
    """Round-trip on the leader's session; raises when the session (and so the lock) is gone."""
    await conn.fetchval("SELECT 1")
