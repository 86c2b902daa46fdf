"""Wake-ups: queuing work sends NOTIFY, and an idle worker claims at once.

The worker here polls only once a minute, so a run that finishes in seconds proves the
notification, not the poll, woke it. (How fast is measured in bench/, not asserted here.)

Workers and runs go through the door; one test also listens on the store's work channel
(``store.transactions.progress.WORK_CHANNEL``) itself, because the NOTIFY an outcome sends
is the thing it checks.
"""

from __future__ import annotations

import asyncpg

from dirigent.engine.store.transactions.progress import WORK_CHANNEL
from tests.support.harness import Harness
from tests.support.waiting import eventually

LISTENING = "SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'LISTEN %'"

TWO_STEPS = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: w}
spec:
  steps:
    a: {block: core.noop}
    b: {block: core.noop, dependsOn: [a]}
"""


async def test_an_idle_worker_wakes_on_notify_not_on_its_poll(h: Harness) -> None:
    await h.apply(TWO_STEPS)
    async with h.workers(1, poll_interval=60.0, sweep_interval=60.0):
        # The worker listens (its last statement on its own connection) and has no work.
        await eventually(lambda: h.fetchval(LISTENING), lambda n: n == 1, what="listening")
        run = await h.run("w")
        assert await h.until_finished(run.run_id, timeout=15) == "succeeded"


async def test_a_step_an_outcome_makes_ready_notifies_the_idle_workers(h: Harness) -> None:
    """Step b is queued by a's outcome: that transaction notifies, so every idle worker (not
    only the one whose freed slot wakes it) claims at once. Listening starts after the run
    was created, so the creation's own notification is not what is heard."""
    await h.apply(TWO_STEPS)
    run = await h.run("w")
    heard: list[str] = []
    listener = await asyncpg.connect(h.dsn)
    try:
        await listener.add_listener(WORK_CHANNEL, lambda *args: heard.append(args[2]))
        async with h.workers(1, poll_interval=60.0, sweep_interval=60.0):
            assert await h.until_finished(run.run_id) == "succeeded"
        await eventually(lambda: heard, what="a notification from the outcome that queued b")
    finally:
        await listener.close()


async def test_without_notify_the_poll_still_finds_work(h: Harness) -> None:
    """A lost notification costs latency, never correctness.

    The root attempt is made due a moment from now by a plain UPDATE (as a delayed retry
    is): nothing sends a NOTIFY when it falls due, so only the worker's poll can find it.
    With the poll at a minute the run would not finish in time; at half a second it does.
    """
    await h.apply(TWO_STEPS)
    run = await h.run("w")
    await h.execute(
        "UPDATE step_attempts SET available_at = now() + interval '1 second' "
        "WHERE run_id = $1 AND step = 'a'",
        run.run_id,
    )
    async with h.workers(1, poll_interval=0.5, sweep_interval=60.0):
        assert await h.until_finished(run.run_id, timeout=15) == "succeeded"
    [a] = await h.attempts(run.run_id, "a")
    assert a["started_at"] >= a["available_at"]


ONE_STEP = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: one}
spec:
  steps:
    a: {block: core.noop}
"""


async def test_the_next_claim_does_not_wait_for_the_last_commit(h: Harness) -> None:
    """Concurrency bounds blocks executing, not outcomes waiting for the writer's commit.

    Another transaction holds the first run's row, so the outcome of its attempt cannot
    commit (the writer locks the run first). A worker with one slot still claims the next
    run's attempt meanwhile: before, the slot was held until the commit and the second run
    stayed queued for as long as the first one's row was held.
    """
    await h.apply(ONE_STEP)
    first = await h.run("one")
    async with h.pool.acquire() as holder:
        hold = holder.transaction()
        await hold.start()
        await holder.execute("SELECT 1 FROM runs WHERE id = $1 FOR NO KEY UPDATE", first.run_id)
        async with h.workers(1, concurrency=1, poll_interval=60.0):
            await eventually(
                lambda: h.attempts(first.run_id, "a"),
                lambda rows: rows[0]["status"] == "running",
                what="the first attempt claimed",
            )
            second = await h.run("one")
            await eventually(
                lambda: h.attempts(second.run_id, "a"),
                lambda rows: rows[0]["status"] == "running",
                what="the second attempt claimed while the first one's outcome waits",
            )
            assert (await h.attempts(first.run_id, "a"))[0]["status"] == "running"
            await hold.commit()
            for run in (first, second):
                assert await h.until_finished(run.run_id) == "succeeded"
