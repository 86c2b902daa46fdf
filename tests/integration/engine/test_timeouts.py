"""Every block call is bounded: execute and poke by the step's timeout, probe, fetch and
cancel by it too (or a default), and a hanging probe by the step's deadline; a TimeoutError
the block raises itself is its own error."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.integration.engine.test_remote_failures import kinds
from tests.support.harness import Harness


def hanging(tmp: Path, *, extra: str, limits: str) -> str:
    return f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: hang}}
spec:
  steps:
    job:
      block: testing.remote
      poll: 100ms
      {limits}
      config: {{dir: "{tmp}", polls: 1{extra}}}
"""


async def test_a_timeout_the_block_raises_is_its_own_error(h: Harness) -> None:
    await h.apply("""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: own}
spec:
  steps:
    call: {block: testing.times_out, timeout: 1h}
""")
    run = await h.run("own")
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "failed"
    [attempt] = await h.attempts(run.run_id, "call")
    assert attempt["error_code"] == "engine.block.error"
    assert "the upstream service timed out" in attempt["error_message"]


async def test_a_hanging_probe_is_bounded_and_counted_as_a_probe_error(
    h: Harness, tmp_path: Path
) -> None:
    await h.apply(hanging(tmp_path, extra=", probe_sleep: 3600", limits="timeout: 300ms"))
    run = await h.run("hang")
    async with h.workers(1):
        assert await h.until_finished(run.run_id, timeout=30) == "failed"
    [job] = await h.attempts(run.run_id, "job")
    assert job["error_code"] == "engine.remote.lost"
    assert kinds(tmp_path).count("submit") == 1
    assert kinds(tmp_path).count("probe") == 5
    assert kinds(tmp_path)[-1] == "cancel"


async def test_a_hanging_fetch_is_bounded(h: Harness, tmp_path: Path) -> None:
    await h.apply(hanging(tmp_path, extra=", fetch_sleep: 3600", limits="timeout: 300ms"))
    run = await h.run("hang")
    async with h.workers(1):
        assert await h.until_finished(run.run_id, timeout=30) == "failed"
    [job] = await h.attempts(run.run_id, "job")
    assert job["error_code"] == "engine.remote.lost"
    assert "fetch of remote job" in job["error_message"]
    assert kinds(tmp_path).count("fetch") == 5


async def test_the_deadline_is_kept_while_a_probe_hangs(h: Harness, tmp_path: Path) -> None:
    # No step timeout: the probe's own bound is the default minute, but the deadline is 1s.
    await h.apply(hanging(tmp_path, extra=", probe_sleep: 3600", limits="deadline: 1s"))
    run = await h.run("hang")
    async with h.workers(1):
        assert await h.until_finished(run.run_id, timeout=15) == "failed"
    [job] = await h.attempts(run.run_id, "job")
    assert job["error_code"] == "engine.remote.deadline"
    assert (job["finished_at"] - job["first_started_at"]).total_seconds() < 10
    assert kinds(tmp_path)[-1] == "cancel"


async def test_an_endless_jq_program_times_out_and_the_workers_other_attempts_go_on(
    h: Harness, tmp_path: Path
) -> None:
    """jq held the interpreter in the worker: the timeout could not fire and every other
    attempt, the heartbeat included, stalled. Now the program runs in a child process."""
    await h.apply("""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: endless}
spec:
  steps:
    spin: {block: transform.jq, timeout: 2s, config: {program: "last(range(infinite))", input: 1}}
""")
    await h.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: beside}}
spec:
  steps:
    a: {{block: testing.record, config: {{path: "{tmp_path / "rec"}"}}}}
    b: {{block: testing.record, dependsOn: [a], config: {{path: "{tmp_path / "rec"}"}}}}
""")
    endless = await h.run("endless")
    async with h.workers(1, concurrency=4):
        started = asyncio.get_running_loop().time()
        beside = [await h.run("beside") for _ in range(3)]
        for run in beside:  # finished while the program spins in its child
            assert await h.until_finished(run.run_id, timeout=10) == "succeeded"
        assert asyncio.get_running_loop().time() - started < 10
        assert await h.until_finished(endless.run_id, timeout=30) == "failed"
    [spin] = await h.attempts(endless.run_id, "spin")
    assert spin["error_code"] == "engine.step.timeout", spin
