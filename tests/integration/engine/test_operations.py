"""Running unattended: step timeouts, the workers registry, graceful shutdown, stuck runs
and retention."""

from __future__ import annotations

import datetime as dt
import signal
import subprocess
from pathlib import Path

from tests.support.harness import Harness, spawn_worker
from tests.support.waiting import eventually


async def test_a_step_timeout_cancels_the_call_and_fails_transient(h: Harness) -> None:
    await h.apply("""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: t}
spec:
  steps:
    slow: {block: core.sleep, timeout: 200ms, retry: {maxAttempts: 2, backoff: 10ms, maxBackoff: 10ms},
           config: {seconds: 30}}
""")
    run = await h.run("t")
    async with h.workers(1):
        assert await h.until_finished(run.run_id, timeout=15) == "failed"
    attempts = await h.attempts(run.run_id)
    assert [(a["error_class"], a["error_code"]) for a in attempts] == [
        ("transient", "engine.step.timeout")
    ] * 2


async def test_workers_register_heartbeat_and_stop_cleanly(
    h: Harness, db_url: str, tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    proc = spawn_worker(
        db_url,
        tmp_path,
        concurrency=3,
        extra={"DIRIGENT_WORKER_TAGS": "gpu,eu", "DIRIGENT_HEARTBEAT_INTERVAL": "200ms"},
    )
    processes.append(proc)
    await eventually(
        lambda: h.fetchval("SELECT count(*) FROM workers"), timeout=30, what="the worker row"
    )
    first_seen = await h.fetchval("SELECT last_seen_at FROM workers")
    await eventually(
        lambda: h.fetchval("SELECT last_seen_at FROM workers"),
        lambda seen: seen != first_seen,
        timeout=30,
        what="a heartbeat",
    )
    row = await h.fetchval(
        "SELECT row(hostname <> '', version, plugins, tags, concurrency, status)::text FROM workers"
    )
    assert row == '(t,0.1.0,"[""builtin"", ""s3"", ""testing""]","[""gpu"", ""eu""]",3,active)'
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    assert await h.fetchval("SELECT status FROM workers") == "stopped"


async def test_sigterm_hands_back_leases_it_cannot_finish(
    h: Harness, db_url: str, tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    log = tmp_path / "rec.log"
    await h.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: long}}
spec:
  steps:
    work: {{block: testing.record, config: {{path: "{log}", sleep: 60}}}}
""")
    run = await h.run("long")
    proc = spawn_worker(db_url, tmp_path / "art")
    processes.append(proc)
    await eventually(log.exists, timeout=30, what="the block call started")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    [work] = await h.attempts(run.run_id, "work")
    assert (work["status"], work["lease_owner"]) == (
        "queued",
        None,
    )  # handed back, not left to expire
    assert await h.status(run.run_id) == "running"


async def test_the_sweeper_marks_gone_workers_and_stuck_runs(h: Harness) -> None:
    await h.apply("""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: s}
spec:
  steps:
    a: {block: core.noop}
""")
    run = await h.run("s")
    await h.execute(
        "INSERT INTO workers (id, hostname, version, concurrency, last_seen_at) "
        "VALUES ('ghost', 'h', 'v', 1, now() - interval '1 hour')"
    )
    await h.execute(
        "UPDATE runs SET last_progress_at = now() - interval '2 hours' WHERE id = $1", run.run_id
    )
    worker = h.worker(stuck_run=dt.timedelta(hours=1))
    worker.config.tags = ["nothing-matches"]  # so it claims nothing and the run stays stuck
    await h.execute(
        "UPDATE step_attempts SET requires_workers = '[\"elsewhere\"]' WHERE run_id = $1",
        run.run_id,
    )
    first = await worker.sweep()
    again = await worker.sweep()
    assert first["workers_gone"] == 1 and first["stuck"] == [run.run_id]
    assert again["stuck"] == []  # flagged once per episode
    stuck_logs = [e["message"] for e in await h.logs(run.run_id) if "stuck" in e["message"]]
    assert stuck_logs == ["run stuck: no progress for 1:00:00"]


async def test_retention_prunes_old_runs_with_their_scratch_and_old_logs(h: Harness) -> None:
    await h.apply(
        """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: r}
spec:
  steps:
    big: {block: core.echo, config: {value: "%s"}}
"""
        % ("x" * 70_000)
    )
    old = await h.run("r")
    new = await h.run("r")
    async with h.workers(1):
        await h.until_finished(old.run_id)
        await h.until_finished(new.run_id)
    assert h.storage.files is not None
    old_scratch = h.storage.files.path(h.storage.run_prefix(h.namespace, old.run_id))
    assert old_scratch.exists()  # the large output was written under the run's prefix
    await h.execute(
        "UPDATE runs SET finished_at = now() - interval '40 days' WHERE id = $1", old.run_id
    )
    await h.execute(
        "UPDATE log_entries SET created_at = now() - interval '10 days' WHERE run_id = $1",
        new.run_id,
    )
    unset = await h.worker().sweep()
    assert unset["pruned"] == [] and unset["logs_pruned"] == 0  # nothing is deleted unless asked
    result = await h.worker(
        retention_runs=dt.timedelta(days=30), retention_logs=dt.timedelta(days=7)
    ).sweep()
    assert result["pruned"] == [old.run_id]
    assert not old_scratch.exists()
    assert await h.fetchval("SELECT count(*) FROM runs") == 1
    # A pruned run's history goes with it (a statement trigger, not keys: migration 0016).
    for table in ("engine_events", "artifact_refs", "log_entries"):
        history = f"SELECT count(*) FROM {table} WHERE run_id = $1"
        assert await h.fetchval(history, old.run_id) == 0, table
    for table in ("engine_events", "artifact_refs"):
        assert await h.fetchval(f"SELECT count(*) FROM {table} WHERE run_id = $1", new.run_id) > 0
    assert result["logs_pruned"] > 0
    assert await h.fetchval("SELECT count(*) FROM log_entries WHERE run_id = $1", new.run_id) == 0
