"""``engine.events.subscribe()`` without a cursor: the path the operator takes on first start.

"From now" is read before the subscription opens its LISTEN connection, so an event that
commits while that connection opens is news to it, found by its first read once it listens;
events committed before it subscribed are not delivered, events committed after are.

The opening of the LISTEN connection is held on purpose, so the test knows the subscriber is
between reading "now" and listening: a login event trigger makes the next connection to this
database wait for an advisory lock the test holds. (The late-commit case, an event of a
transaction that began first but commits last, is test_door.py's.)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import asyncpg

from dirigent.engine import Engine
from dirigent.engine.shapes.views import EngineEvent
from tests.support.harness import Harness
from tests.support.waiting import eventually

PIPELINE = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: p}
spec:
  steps:
    a: {block: core.noop}
"""

GATE, TOKEN = 7301, 7302  # advisory lock keys: the gate the test holds, the one-login token
# The first login to take the token waits at the gate; the token stays with that session, so
# every later login passes at once.
HOLD_NEXT_LOGIN = f"""
CREATE FUNCTION hold_next_login() RETURNS event_trigger LANGUAGE plpgsql AS $$
BEGIN
    IF pg_try_advisory_lock({TOKEN}) THEN
        PERFORM pg_advisory_lock_shared({GATE});
        PERFORM pg_advisory_unlock_shared({GATE});
    END IF;
END $$;
CREATE EVENT TRIGGER hold_next_login ON login EXECUTE FUNCTION hold_next_login();
"""
AT_THE_GATE = """SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
                   AND wait_event_type = 'Lock' AND wait_event = 'advisory'"""
LISTENING = """SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
                 AND query ILIKE 'LISTEN %'"""
# Below "now" for a subscriber: every event of the run is older than every open transaction.
BELOW_NOW = """SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint
                  > (SELECT max(xid)::text::bigint FROM engine_events WHERE run_id = $1)"""


@contextlib.asynccontextmanager
async def subscribed(engine: Engine) -> AsyncIterator[list[EngineEvent]]:
    """A subscription from now (no cursor), its events collected as they come."""
    got: list[EngineEvent] = []

    async def follow() -> None:
        # poll=60: nothing here is found by polling, only by the first read and by NOTIFY.
        async for event in engine.events.subscribe(poll=60):
            got.append(event)

    task = asyncio.create_task(follow())
    try:
        yield got
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def runs_seen(events: list[EngineEvent]) -> list[tuple[int, str]]:
    return [(e.run_id, e.status) for e in events if e.entity == "run"]


async def warm_pools(h: Harness) -> None:
    """Open the connections the test will use before the gate exists: only the subscriber's
    LISTEN connection may log in while it is armed."""
    await asyncio.gather(*(h.engine.runs.page("default") for _ in range(4)))
    await asyncio.gather(*(h.fetchval("SELECT pg_sleep(0.05)") for _ in range(4)))


async def test_a_subscription_from_now_gets_what_commits_while_it_opens_and_after(
    h: Harness,
) -> None:
    await h.apply(PIPELINE)
    before = await h.run("p")
    await eventually(
        lambda: h.fetchval(BELOW_NOW, before.run_id),
        what="the earlier run's events below every open transaction",
    )
    await warm_pools(h)
    gatekeeper = await asyncpg.connect(h.dsn)
    try:
        await gatekeeper.execute(f"SELECT pg_advisory_lock({GATE})")
        await h.execute(HOLD_NEXT_LOGIN)
        async with subscribed(h.engine) as live:
            # The subscriber has read "now" and waits at the gate to open its LISTEN connection.
            await eventually(
                lambda: h.fetchval(AT_THE_GATE), lambda n: n == 1, what="a login at the gate"
            )
            during = await h.run("p")  # committed while the LISTEN connection opens
            await gatekeeper.execute(f"SELECT pg_advisory_unlock({GATE})")
            await eventually(lambda: h.fetchval(LISTENING), lambda n: n == 1, what="LISTEN")
            after = await h.run("p")  # committed once it listens
            await eventually(
                lambda: runs_seen(live),
                lambda seen: (after.run_id, "running") in seen,
                timeout=20,
                what="the later run's first event",
            )
    finally:
        await gatekeeper.close()
    assert runs_seen(live) == [(during.run_id, "running"), (after.run_id, "running")]
    assert before.run_id not in {e.run_id for e in live}  # nothing from before subscribing
    assert len({e.cursor for e in live}) == len(live)  # each event once
