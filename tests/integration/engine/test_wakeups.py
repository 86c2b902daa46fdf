"""Wake-ups: queuing work sends NOTIFY, and an idle worker claims at once.

The worker here polls only once a minute, so a run that finishes in seconds proves the
notification, not the poll, woke it. (How fast is measured in bench/, not asserted here.)
"""

from __future__ import annotations

import asyncio

from tests.integration.engine.harness import Harness

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
        await asyncio.sleep(0.5)  # the worker has claimed nothing and is now waiting
        run = await h.run("w")
        async with asyncio.timeout(15):
            assert await h.until_settled(run.run_id) == "succeeded"


async def test_without_notify_the_poll_still_finds_work(h: Harness) -> None:
    """A lost notification costs latency, never correctness."""
    await h.apply(TWO_STEPS)
    run = await h.run("w")
    # Queue a root by hand with no NOTIFY: the worker's poll must pick it up.
    async with h.workers(1, poll_interval=0.2):
        assert await h.until_settled(run.run_id) == "succeeded"
