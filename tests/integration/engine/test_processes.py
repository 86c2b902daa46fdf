"""Real worker processes: concurrent claims never run an attempt twice; fairness holds."""

from __future__ import annotations

import collections
import signal
import subprocess
from pathlib import Path

from tests.support.harness import Harness, spawn_worker
from tests.support.waiting import eventually


async def test_two_worker_processes_never_execute_an_attempt_twice(
    h: Harness, db_url: str, tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    log = tmp_path / "executions.log"
    items = list(range(300))
    await h.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: many}}
spec:
  steps:
    each: {{block: testing.record, forEach: {items}, config: {{path: "{log}"}}}}
    after: {{block: testing.record, dependsOn: [each], config: {{path: "{log}"}}}}
""")
    processes += [spawn_worker(db_url, tmp_path / "art"), spawn_worker(db_url, tmp_path / "art")]
    await eventually(  # both compete from the first attempt on
        lambda: h.fetchval("SELECT count(*) FROM workers WHERE status = 'active'"),
        lambda n: n >= 2,
        timeout=60,
        what="two active workers",
    )
    runs = [await h.run("many") for _ in range(2)]
    for run in runs:
        assert await h.until_finished(run.run_id, timeout=120) == "succeeded"
    starts = collections.Counter(
        ln.split()[1] for ln in log.read_text().splitlines() if ln.startswith("start")
    )
    assert len(starts) == 2 * (len(items) + 1)
    assert max(starts.values()) == 1, [k for k, v in starts.items() if v > 1]
    owners = await h.fetchval(
        "SELECT count(DISTINCT lease_owner) FROM step_attempts"
    )  # cleared at finish
    assert owners == 0
    pids = {ln.split()[3] for ln in log.read_text().splitlines()}
    assert len(pids) == 2  # both processes executed attempts
    for p in processes:
        assert p.poll() is None, p.stderr.read().decode() if p.stderr else ""


async def test_a_big_fan_out_does_not_starve_a_small_run(h: Harness, tmp_path: Path) -> None:
    log = tmp_path / "order.log"
    await h.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: big}}
spec:
  steps:
    each: {{block: testing.record, forEach: {list(range(400))}, config: {{path: "{log}"}}}}
""")
    await h.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: small}}
spec:
  steps:
    first: {{block: testing.record, config: {{path: "{log}"}}}}
    second: {{block: testing.record, dependsOn: [first], config: {{path: "{log}"}}}}
""")
    big = await h.run("big")
    small = await h.run("small")
    async with h.workers(1, concurrency=1):
        assert await h.until_finished(small.run_id) == "succeeded"
        assert await h.until_finished(big.run_id, timeout=120) == "succeeded"
    done_when_small_finished = await h.fetchval(
        """SELECT count(*) FROM step_attempts WHERE run_id = $1
           AND finished_at <= (SELECT finished_at FROM runs WHERE id = $2)""",
        big.run_id,
        small.run_id,
    )
    # Round-robin: the small run's two steps interleave with the fan-out, one at a time.
    assert done_when_small_finished <= 4, done_when_small_finished
    order = [ln.split()[2] for ln in log.read_text().splitlines() if ln.startswith("start")]
    assert order.index("second") <= 4


async def test_priority_is_claimed_first(h: Harness, tmp_path: Path) -> None:
    log = tmp_path / "order.log"
    for name, prio in (("low", "Low"), ("high", "High")):
        await h.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: {name}}}
spec:
  priority: {prio}
  steps:
    {name}_step: {{block: testing.record, forEach: [1, 2, 3], config: {{path: "{log}"}}}}
""")
    low = await h.run("low")
    high = await h.run("high")
    async with h.workers(1, concurrency=1):
        await h.until_finished(low.run_id)
        await h.until_finished(high.run_id)
    order = [ln.split()[2] for ln in log.read_text().splitlines() if ln.startswith("start")]
    assert order == ["high_step"] * 3 + ["low_step"] * 3


async def test_tag_routing_claims_only_what_a_worker_can_run(h: Harness) -> None:
    await h.apply("""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: gpu}
spec:
  requires: {workers: [gpu]}
  steps:
    train: {block: core.noop}
""")
    await h.apply("""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: anywhere}
spec:
  steps:
    work: {block: core.noop}
""")
    run = await h.run("gpu")
    witness = await h.run("anywhere")
    async with h.workers(1, tags=["cpu"]):
        # The cpu worker claimed the witness, queued after the gpu attempt: a claim pass that
        # took the witness would have taken the gpu attempt too, had the tags matched.
        assert await h.until_finished(witness.run_id) == "succeeded"
        assert await h.status(run.run_id) == "running"  # nobody here carries the gpu tag
    async with h.workers(1, tags=["gpu", "eu"]):
        assert await h.until_finished(run.run_id) == "succeeded"


async def test_two_workers_parking_and_recording_the_same_runs_never_deadlock(
    h: Harness, db_url: str, tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    """Parkings (remote jobs going back to waiting) and outcomes of the same runs, written by
    two worker processes at once: every writer takes its run locks first, in one order, so
    PostgreSQL never has to break a deadlock (its own counter stays where it was)."""
    items = list(range(150))
    await h.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: mixed}}
spec:
  steps:
    jobs: {{block: testing.remote, forEach: {items}, poll: 50ms, onItemFailure: Continue,
           config: {{dir: "{tmp_path}/remote", polls: 3}}}}
    plain: {{block: core.noop, forEach: {items}}}
    after: {{block: core.noop, dependsOn: [jobs, plain]}}
""")
    before = await h.fetchval(
        "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
    )
    processes += [spawn_worker(db_url, tmp_path / "art"), spawn_worker(db_url, tmp_path / "art")]
    await eventually(
        lambda: h.fetchval("SELECT count(*) FROM workers WHERE status = 'active'"),
        lambda n: n >= 2,
        timeout=60,
        what="two active workers",
    )
    runs = [await h.run("mixed") for _ in range(4)]
    for run in runs:
        assert await h.until_finished(run.run_id, timeout=180) == "succeeded"
    pids = await h.fetchval(
        "SELECT count(DISTINCT output->>'ref') FROM step_attempts WHERE step = 'jobs'"
    )
    assert pids == 4 * len(items)
    for p in processes:  # a backend flushes its statistics when it exits
        p.send_signal(signal.SIGTERM)
    for p in processes:
        p.wait(timeout=30)
    after = await h.fetchval(
        "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
    )
    assert after == before, f"{after - before} deadlocks broken by PostgreSQL"
