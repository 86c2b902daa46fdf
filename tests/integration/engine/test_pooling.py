"""The connection budget: bounded whatever the concurrency, and PgBouncer in transaction mode.

A worker's blocks hold no connection while they run, so a worker at concurrency 64 shares
its pool (``database_pool_size``, 10 by default) plus one LISTEN connection. Behind a real
PgBouncer (Debian's package, on loopback, ``pool_mode = transaction``) the pool goes through
the bouncer while LISTEN, the scheduler's lock and the schema check use
``database_direct_url``: the worker here polls only every 60 s, so the run finishing well
before that shows the NOTIFY reached it on its direct connection.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from dirigent.engine import Engine, EngineSettings, RunRequest
from dirigent.engine.shapes.manifests.loading import parse_manifest, read_text
from tests.support.harness import Harness, spawn_worker
from tests.support.servers import free_port
from tests.support.waiting import eventually, wait_until

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
BOUNCER_POOL = 4  # server connections PgBouncer keeps per database


@pytest.fixture
def bouncer(db_url: str) -> Iterator[tuple[str, Path]]:
    """A PgBouncer in transaction mode in front of this test's database: (its URL, its log)."""
    assert os.path.exists(PGBOUNCER), "pgbouncer is needed: apt-get install -y pgbouncer"
    pg_port = int(db_url.rsplit(":", 1)[1].split("/")[0])
    port = free_port()
    # PgBouncer refuses to run as root: it drops to `postgres`, which must read its files.
    folder = Path(tempfile.mkdtemp(prefix="dirigent-pgbouncer-"))
    folder.chmod(0o755)
    (folder / "users.txt").write_text('"postgres" ""\n')
    log = folder / "pgbouncer.log"
    (folder / "pgbouncer.ini").write_text(f"""
[databases]
* = host=127.0.0.1 port={pg_port}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {folder}/users.txt
pool_mode = transaction
default_pool_size = {BOUNCER_POOL}
max_client_conn = 200
logfile = {log}
""")
    args = [PGBOUNCER, str(folder / "pgbouncer.ini")]
    if os.geteuid() == 0:
        args[1:1] = ["-u", "postgres"]
        for path in (folder, *folder.iterdir()):
            shutil.chown(path, "postgres")
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def accepts() -> bool:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_until(accepts, timeout=10, what=f"pgbouncer accepting on port {port}")
        yield db_url.replace(f":{pg_port}/", f":{port}/"), log
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


PIPELINE = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: pooled}
spec:
  steps:
    each: {block: core.noop, forEach: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]}
    after: {block: core.noop, dependsOn: [each]}
"""


async def test_the_engine_works_behind_pgbouncer_with_listen_on_a_direct_connection(
    bouncer: tuple[str, Path], db_url: str, tmp_path: Path
) -> None:
    bouncer_url, log = bouncer
    settings = EngineSettings(
        database_url=bouncer_url,
        database_direct_url=db_url,
        artifact_root=tmp_path / "art",
        metrics_port=None,
    )
    async with Engine.open(settings) as engine:
        docs, _ = read_text(PIPELINE)
        manifest, problems = parse_manifest(docs[0].data)
        assert manifest is not None, problems
        await engine.manifests.apply(manifest, "default")
        worker = engine.workers.build(concurrency=16, poll_interval=60.0, sweep_interval=60.0)
        task = asyncio.create_task(worker.run())
        try:
            for _ in range(3):  # between runs the worker is idle until NOTIFY (its poll is 60 s)
                run = await engine.runs.start(RunRequest("default", "pooled"))
                detail = await eventually(
                    lambda r=run.run_id: engine.runs.get("default", r),  # type: ignore[misc]
                    lambda d: d.status in ("succeeded", "failed", "completed_with_errors"),
                    timeout=30,
                    what=f"run {run.run_id} finished behind pgbouncer",
                )
                assert detail.status == "succeeded"
        finally:
            worker.stop()
            await task
    database = db_url.rsplit("/", 1)[1]
    # The pool's transactions went through the bouncer, not around it.
    assert f"db={database}" in log.read_text() or f"{database}/postgres" in log.read_text()


async def test_a_worker_at_concurrency_64_opens_a_bounded_number_of_connections(
    h: Harness, db_url: str, tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    await h.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: wide}}
spec:
  steps:
    each: {{block: testing.record, forEach: {list(range(128))}, config: {{path: "{tmp_path}/r.log", sleep: 1.5}}}}
""")
    since = await h.fetchval("SELECT now()")
    processes.append(spawn_worker(db_url, tmp_path / "art", concurrency=64))
    run = await h.run("wide")
    peaks = [0, 0]  # attempts running, connections the worker opened: the most seen at once

    async def sampled_status() -> str:
        running, connections = await _sample(h, since)
        peaks[:] = [max(peaks[0], running), max(peaks[1], connections)]
        return await h.status(run.run_id)

    await eventually(
        sampled_status,
        lambda status: status != "running",
        timeout=120,
        what=f"run {run.run_id} finished (peaks sampled meanwhile)",
    )
    peak_running, peak_connections = peaks
    assert await h.status(run.run_id) == "succeeded"
    assert peak_running >= 32, peak_running  # the worker did run many blocks at once
    # The pool (database_pool_size, default 10) plus the LISTEN connection.
    assert 1 <= peak_connections <= EngineSettings().database_pool_size + 1, peak_connections


async def _sample(h: Harness, since: object) -> tuple[int, int]:
    """(attempts running, connections the worker process opened) at one instant."""
    conn: asyncpg.Connection
    async with h.pool.acquire() as conn:
        row = await conn.fetchrow(
            """SELECT (SELECT count(*) FROM step_attempts WHERE status = 'running'),
                      (SELECT count(*) FROM pg_stat_activity
                       WHERE datname = current_database() AND backend_type = 'client backend'
                         AND backend_start >= $1 AND pid <> pg_backend_pid())""",
            since,
        )
    return int(row[0]), int(row[1])
