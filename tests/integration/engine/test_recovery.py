"""Crash recovery with real process kills (SIGKILL), never simulated exceptions.

A worker is killed in the middle of a block call and in the middle of a probe; the lease
expires, the sweeper in a surviving worker recovers the attempt — into waiting when its
remote handle was committed, otherwise back to the queue — and the run finishes. A
committed handle is never submitted twice.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from tests.support.harness import Harness, spawn_worker
from tests.support.waiting import eventually

FAST_LEASES = {
    "DIRIGENT_LEASE_DURATION": "2s",
    "DIRIGENT_HEARTBEAT_INTERVAL": "500ms",
    "DIRIGENT_SWEEP_INTERVAL": "0.5",
}


async def wait_for_line(path: Path, prefix: str, timeout: float = 30) -> None:
    await eventually(
        lambda: (
            path.exists() and any(ln.startswith(prefix) for ln in path.read_text().splitlines())
        ),
        timeout=timeout,
        what=f"a line starting {prefix!r} in {path.name}",
    )


async def test_a_worker_killed_mid_block_call_is_recovered_and_the_run_finishes(
    h: Harness, db_url: str, tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    log = tmp_path / "rec.log"
    await h.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: slow}}
spec:
  steps:
    work: {{block: testing.record, config: {{path: "{log}", sleep: 3}}}}
    after: {{block: core.noop, dependsOn: [work]}}
""")
    run = await h.run("slow")
    victim = spawn_worker(db_url, tmp_path / "art", extra=FAST_LEASES)
    processes.append(victim)
    await wait_for_line(log, "start")
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    assert await h.fetchval("SELECT status FROM step_attempts WHERE step = 'work'") == "running"
    processes.append(spawn_worker(db_url, tmp_path / "art", extra=FAST_LEASES))
    assert await h.until_finished(run.run_id, timeout=60) == "succeeded"
    lines = [ln.split()[0] for ln in log.read_text().splitlines()]
    assert lines == [
        "start",
        "start",
        "end",
    ]  # the killed call never finished; the recovered one did
    [work] = await h.attempts(run.run_id, "work")
    assert work["number"] == 1  # recovery re-queues the same attempt: no retry budget spent
    recovered = [e for e in await h.logs(run.run_id) if "lease expired" in e["message"]]
    assert [e["message"] for e in recovered] == ["lease expired; recovered to queued"]


async def test_a_worker_killed_mid_probe_resumes_probing_and_never_resubmits(
    h: Harness, db_url: str, tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    jobs = tmp_path / "jobs"
    await h.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: remote}}
spec:
  steps:
    job: {{block: testing.remote, poll: 100ms, config: {{dir: "{jobs}", polls: 2, probe_sleep: 3}}}}
""")
    run = await h.run("remote")
    victim = spawn_worker(db_url, tmp_path / "art", extra=FAST_LEASES)
    processes.append(victim)
    await wait_for_line(jobs / "events.log", "probe")
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    processes.append(spawn_worker(db_url, tmp_path / "art", extra=FAST_LEASES))
    assert await h.until_finished(run.run_id, timeout=60) == "succeeded"
    kinds = [ln.split()[0] for ln in (jobs / "events.log").read_text().splitlines()]
    assert kinds.count("submit") == 1
    assert kinds.count("fetch") == 1
    assert kinds.count("probe") >= 3  # the interrupted probe, then probing resumed
    recovered = [e["message"] for e in await h.logs(run.run_id) if "lease expired" in e["message"]]
    assert recovered == ["lease expired; recovered to waiting"]
