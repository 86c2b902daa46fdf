"""shell.run, pipeline.run and time.window through real runs."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from dirigent.blocks.timing import WindowConfig, window_state
from dirigent.engine.shapes.problems import ProblemsError
from tests.integration.blocks.test_http import pipeline, run_one
from tests.support.harness import Harness
from tests.support.waiting import eventually

UNSAFE = frozenset({"shell.run"})


async def start(h: Harness, name: str) -> int:
    return (await h.run(name)).run_id


async def test_shell_run_keeps_tails_and_stores_whole_streams(h: Harness) -> None:
    await h.apply(
        pipeline(
            "sh",
            """    sh:
      block: shell.run
      config: {script: 'seq 1 2000; echo oops >&2', tail: 16}""",
        )
    )
    run_id = await start(h, "sh")
    async with h.workers(1, enabled_unsafe=UNSAFE):
        assert await h.until_finished(run_id) == "succeeded"
    [sh] = await h.attempts(run_id)
    out = sh["output"]
    assert out["exit_code"] == 0
    assert out["stdout_tail"].endswith("1999\n2000\n") and len(out["stdout_tail"]) == 16
    assert out["stderr_tail"] == "oops\n"
    whole = await h.storage.read_bytes(out["stdout_uri"])
    assert whole.decode().splitlines() == [str(i) for i in range(1, 2001)]


async def test_shell_run_fails_with_the_exit_code(h: Harness) -> None:
    await h.apply(
        pipeline("sh", "    sh: {block: shell.run, config: {script: 'echo bad >&2; exit 3'}}")
    )
    run_id = await start(h, "sh")
    async with h.workers(1, enabled_unsafe=UNSAFE):
        assert await h.until_finished(run_id) == "failed"
    [sh] = await h.attempts(run_id)
    assert sh["error_code"] == "shell.exit"
    assert sh["error_params"]["exit_code"] == 3
    assert sh["error_params"]["stderr_tail"] == "bad\n"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def _pid_gone(pid: int, timeout: float = 10.0) -> bool:
    try:
        await eventually(lambda: not _alive(pid), timeout=timeout, what=f"process {pid} gone")
    except AssertionError:
        return False
    return True


async def _read_pid(path: Path, timeout: float = 10.0) -> int:
    await eventually(
        lambda: path.exists() and path.read_text().strip(),
        timeout=timeout,
        what="the command started",
    )
    return int(path.read_text())


async def test_a_timeout_kills_the_whole_process_group(h: Harness, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    await h.apply(
        pipeline(
            "sh",
            f"""    sh:
      block: shell.run
      timeout: 1s
      config: {{script: 'sleep 60 & echo $! > {pidfile}; wait'}}""",
        )
    )
    run_id = await start(h, "sh")
    async with h.workers(1, enabled_unsafe=UNSAFE):
        grandchild = await _read_pid(pidfile)
        assert await h.until_finished(run_id) == "failed"
        assert await _pid_gone(grandchild), "the background sleep outlived the step's timeout"
    [sh] = await h.attempts(run_id)
    assert sh["error_code"] == "engine.step.timeout"


async def test_cancelling_the_run_kills_the_command(h: Harness, tmp_path: Path) -> None:
    pidfile = tmp_path / "sh.pid"
    await h.apply(
        pipeline(
            "sh",
            f"    sh: {{block: shell.run, config: {{script: 'echo $$ > {pidfile}; exec sleep 60'}}}}",
        )
    )
    run_id = await start(h, "sh")
    async with h.workers(1, enabled_unsafe=UNSAFE, heartbeat=dt.timedelta(milliseconds=200)):
        pid = await _read_pid(pidfile)
        await h.engine.runs.cancel(h.namespace, run_id, reason="test")
        assert await _pid_gone(pid), "the command outlived the cancelled run"
    assert await h.status(run_id) == "cancelled"


CHILD = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: child}
spec:
  params:
    type: object
    properties: {n: {type: integer}}
  steps:
    double: {block: transform.jq, config: {program: '. * 2', input: '${params.n}'}}
"""


async def test_pipeline_run_starts_a_child_waits_and_reads_its_outputs(h: Harness) -> None:
    await h.apply(CHILD)
    await h.apply(
        pipeline(
            "parent",
            "    call: {block: pipeline.run, poll: 100ms, config: {pipeline: child, params: {n: 21}}}",
        )
    )
    status, [call] = await run_one(h, "parent")
    assert status == "succeeded", (call["error_code"], call["error_message"])
    out = call["output"]
    assert out["state"] == "succeeded"
    assert out["outputs"] == {"double": {"value": 42}}
    child = await h.fetchval(
        "SELECT row_to_json(r)::text FROM (SELECT parent_run_id, triggered_by_kind, triggered_by_ref FROM runs WHERE id = $1) r",
        out["run_id"],
    )
    assert f'"parent_run_id":{call["run_id"]}' in child
    assert '"triggered_by_kind":"pipeline"' in child
    assert f'"triggered_by_ref":"{call["run_id"]}/call"' in child


async def test_a_pipeline_starting_itself_is_stopped_by_the_depth_guard(h: Harness) -> None:
    await h.apply(
        pipeline(
            "loop",
            "    again: {block: pipeline.run, poll: 100ms, config: {pipeline: loop, maxDepth: 3}}",
        )
    )
    run = await h.run("loop")
    async with h.workers(1):
        assert await h.until_finished(run.run_id, timeout=30) == "failed"
    runs = await h.fetchval("SELECT count(*) FROM runs")
    assert runs == 3
    deepest = await h.fetchval("SELECT error_code FROM step_attempts ORDER BY id DESC LIMIT 1")
    assert deepest == "engine.runs.too_deep"


async def test_cancelling_the_parent_cancels_the_child(h: Harness) -> None:
    await h.apply(
        pipeline("slow", "    wait: {block: core.wait, poll: 100ms, config: {pokes: 100000}}")
    )
    await h.apply(
        pipeline("parent", "    call: {block: pipeline.run, poll: 100ms, config: {pipeline: slow}}")
    )
    run = await h.run("parent")
    async with h.workers(1):
        await eventually(
            lambda: h.fetchval("SELECT count(*) FROM runs"),
            lambda n: n >= 2,
            timeout=10,
            what="the child run",
        )
        await eventually(
            lambda: h.attempts(run.run_id, "call"),
            lambda rows: rows[0]["status"] == "waiting",
            timeout=10,
            what="the parent's call waiting",
        )
        await h.engine.runs.cancel(h.namespace, run.run_id, reason="test")
    child = await h.fetchval("SELECT id FROM runs WHERE parent_run_id = $1", run.run_id)
    assert await h.status(child) == "cancelled"


def test_time_window_is_dst_correct() -> None:
    # 2026-03-29: Europe/Oslo springs forward at 02:00 -> 03:00; a 02:30 start does not exist.
    config = WindowConfig(start=dt.time(2, 30), end=dt.time(4, 0), timezone="Europe/Oslo")
    before = dt.datetime(2026, 3, 29, 0, 59, tzinfo=dt.UTC)  # 01:59 CET
    opened, _, next_open = window_state(config, before)
    assert opened is None
    assert next_open == dt.datetime(2026, 3, 29, 1, 30, tzinfo=dt.UTC)  # 03:30 CEST, gap skipped
    summer = dt.datetime(2026, 7, 1, 0, 45, tzinfo=dt.UTC)  # 02:45 CEST
    opened, closes, _ = window_state(config, summer)
    assert opened == dt.datetime(2026, 7, 1, 0, 30, tzinfo=dt.UTC)
    assert closes == dt.datetime(2026, 7, 1, 2, 0, tzinfo=dt.UTC)


async def test_time_window_succeeds_inside_an_open_window(h: Harness) -> None:
    await h.apply(
        pipeline(
            "win",
            "    w: {block: time.window, config: {start: '00:00', timezone: Pacific/Auckland}}",
        )
    )
    status, [w] = await run_one(h, "win")
    assert status == "succeeded"
    assert w["output"]["closes_at"] is None


async def test_time_window_with_an_unknown_timezone_is_refused_at_apply(h: Harness) -> None:
    with pytest.raises(ProblemsError) as refused:
        await h.apply(
            pipeline(
                "nowhere",
                "    w: {block: time.window, config: {start: '00:00', timezone: Mars/Olympus}}",
            )
        )
    [problem] = refused.value.problems
    assert problem.code == "time.zone.unknown" and "Mars/Olympus" in problem.message
