"""concurrency: Queue under concurrency: never two runs started, and no run left queued.

The first test races two calls of the store's ``start_queued_run`` itself, as two sweepers
would: no door lets a test hold one sweeper inside its transaction while the other starts.
The rest go through the door.
"""

from __future__ import annotations

import asyncio

from dirigent.engine.store.transactions import runs as runs_store
from tests.support.harness import Harness
from tests.support.waiting import eventually

QUEUED = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: q}
spec:
  concurrency: Queue
  params: {type: object, properties: {xs: {type: array, default: [1]}}}
  steps:
    each: {block: core.wait, forEach: "${params.xs}", config: {pokes: 100000}}
"""


async def running(h: Harness) -> int:
    return int(await h.fetchval("SELECT count(*) FROM runs WHERE status = 'running'"))


async def test_two_sweepers_starting_queued_runs_at_once_start_one(h: Harness) -> None:
    await h.apply(QUEUED)
    first = await h.run("q")
    await h.run("q")
    await h.run("q")
    # The state a lost race leaves: nothing running, two queued.
    await h.execute("UPDATE runs SET status = 'cancelled' WHERE id = $1", first.run_id)
    pipeline_id = await h.fetchval("SELECT id FROM pipelines WHERE name = 'q'")
    async with h.pool.acquire() as a, h.pool.acquire() as b:
        tx = a.transaction()
        await tx.start()
        assert await runs_store.start_queued_run(a, pipeline_id, h.versions) is not None
        b_pid = b.get_server_pid()

        async def other() -> int | None:
            async with b.transaction():
                return await runs_store.start_queued_run(b, pipeline_id, h.versions)

        task = asyncio.create_task(other())

        async def blocked() -> bool:
            return task.done() or bool(
                await h.fetchval(
                    "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1", b_pid
                )
            )

        await eventually(blocked, timeout=10, every=0.02, what="the second sweeper on the lock")
        await tx.commit()
        assert await task is None, "the second sweeper must see the run the first started"
    assert await running(h) == 1


async def test_a_started_run_that_finishes_at_once_starts_the_next(h: Harness) -> None:
    await h.apply(QUEUED)
    first = await h.run("q")
    empty = await h.run("q", {"xs": []})
    third = await h.run("q")
    assert (empty.status, third.status) == ("queued", "queued")
    await h.cancel(first.run_id)
    assert await h.status(empty.run_id) == "succeeded"
    assert await h.status(third.run_id) == "running", "started without waiting for a sweeper"
