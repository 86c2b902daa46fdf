"""Two ``dirigent scheduler`` processes on one database: one leads, none double-fires, and a
SIGKILLed leader is replaced by the one that waited."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.harness import Harness
from tests.support.waiting import eventually

SCHEDULES = 50
LEADER_SQL = """
SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND a.application_name LIKE 'dirigent-scheduler:%'
"""


def spawn_scheduler(db_url: str, root: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DIRIGENT_DATABASE_URL": db_url,
        "DIRIGENT_ARTIFACT_ROOT": str(root),
        "DIRIGENT_SCHEDULER_TICK": "0.1",
        "DIRIGENT_METRICS_PORT": "0",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "dirigent.cli", "scheduler"],
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


async def wait_for(h: Harness, sql: str, check: Callable[[Any], bool], timeout: float) -> object:
    return await eventually(lambda: h.fetchval(sql), check, timeout=timeout, what=sql)


async def test_two_schedulers_never_double_fire_and_a_killed_leader_is_replaced(
    h: Harness, tmp_path: Path, db_url: str, processes: list[subprocess.Popen[bytes]]
) -> None:
    await h.apply(
        f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: tick}}
spec:
  steps:
    a: {{block: testing.record, config: {{path: {tmp_path / "rec"}}}}}
"""
    )
    for i in range(SCHEDULES):
        await h.apply(
            f"""
apiVersion: dirigent.dev/v1alpha1
kind: Schedule
metadata: {{name: s{i}}}
spec: {{pipeline: tick, interval: 1s}}
"""
        )
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    processes += [spawn_scheduler(db_url, tmp_path, log) for log in logs]
    # Deadlines are generous: on a loaded 2-core machine a Python process takes seconds to start.
    leader = await wait_for(h, LEADER_SQL, lambda v: v is not None, 120)
    pids = {p.pid: p for p in processes}
    first = pids[int(str(leader).split(":")[1])]
    await wait_for(h, "SELECT count(*) FROM schedule_firings", lambda n: n >= 500, 120)

    first.send_signal(signal.SIGKILL)
    first.wait(10)
    try:
        successor = await wait_for(h, LEADER_SQL, lambda v: v is not None and v != leader, 60)
    except AssertionError:
        for log in logs:
            print(log.name, log.read_text()[-3000:])
        print(
            await h.fetchval(
                "SELECT array_agg(row(l.pid, l.granted, a.application_name, a.state)::text) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory'"
            )
        )
        raise
    assert int(str(successor).split(":")[1]) in pids
    killed_at = await h.fetchval("SELECT count(*) FROM schedule_firings")
    await wait_for(
        h, "SELECT count(*) FROM schedule_firings", lambda n: n >= max(1000, killed_at + 300), 120
    )
    for p in processes:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            p.wait(20)
            assert p.returncode == 0, [log.read_text()[-2000:] for log in logs]

    firings = await h.fetchval("SELECT count(*) FROM schedule_firings")
    assert firings >= 1000
    doubled = await h.fetchval(
        """SELECT count(*) FROM (SELECT schedule_id, scheduled_for FROM schedule_firings
           GROUP BY 1, 2 HAVING count(*) > 1) d"""
    )
    assert doubled == 0
    assert await h.fetchval("SELECT count(*) FROM schedule_firings WHERE result = 'failed'") == 0
    runs = await h.fetchval("SELECT count(*) FROM runs")
    assert runs == firings
    # Every schedule's firings are consecutive slots of its grid (nothing skipped, nothing twice).
    gaps = await h.fetchval(
        """SELECT count(*) FROM (
             SELECT scheduled_for - lag(scheduled_for) OVER (PARTITION BY schedule_id
                                                              ORDER BY scheduled_for) AS gap
             FROM schedule_firings) g
           WHERE gap IS NOT NULL AND gap <> interval '1 second' """
    )
    assert gaps == 0
