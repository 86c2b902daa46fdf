"""The client commands as real subprocesses against a real ``dirigent dev`` on a real port:
apply (plan, then write), pipelines, runs (show, logs, cancel, retry), backfill; NDJSON parsed,
exit codes checked, refusals one line with no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.dev import EXAMPLES, Dev
from tests.support.servers import free_port

pytestmark = pytest.mark.integration
TOKEN = "client-token-0123456789"


@pytest.fixture
def server(tmp_path: Path, state: Path) -> Iterator[dict[str, str]]:
    folder = tmp_path / "served"
    folder.mkdir()
    dev = Dev(folder, state, free_port(), TOKEN)
    ready = dev.expect(lambda r: r["kind"] == "ready")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIRIGENT_")}
    yield {**env, "DIRIGENT_URL": ready["url"], "DIRIGENT_TOKEN": TOKEN}
    assert dev.stop() == 0


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "dirigent.cli", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def records(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_apply_runs_and_backfill_through_the_api(server: dict[str, str], tmp_path: Path) -> None:
    files = tmp_path / "apply"
    files.mkdir()
    for name in ("linear.yaml", "error-handler.yaml", "schedule.yaml"):
        (files / name).write_text((EXAMPLES / name).read_text())

    # (A dry run plans each document against what the server holds: a Schedule naming a
    # Pipeline that is only planned alongside it is refused, so the plan is of the Pipelines.)
    pipelines = ["-f", str(files / "linear.yaml"), "-f", str(files / "error-handler.yaml")]
    plan = cli(server, "apply", *pipelines, "--dry-run", "-o", "json")
    assert plan.returncode == 0, plan.stderr
    planned = {
        (r["name"], r["action"], r["dry_run"]) for r in records(plan) if r["kind"] == "applied"
    }
    assert ("linear", "created", True) in planned and ("error-handler", "created", True) in planned
    listed = cli(server, "pipelines", "list", "-o", "json")
    assert [r for r in records(listed) if r["name"] == "linear"] == []  # the plan wrote nothing

    done = cli(server, "apply", "-f", str(files), "-o", "json")
    assert done.returncode == 0, done.stderr
    again = cli(server, "apply", "-f", str(files / "linear.yaml"), "--dry-run", "-o", "json")
    assert [r["action"] for r in records(again) if r["kind"] == "applied"] == ["unchanged"]
    (files / "linear.yaml").write_text(
        (EXAMPLES / "linear.yaml").read_text().replace("tags: [example]", "tags: [example, x]")
    )
    changed = cli(server, "apply", "-f", str(files / "linear.yaml"), "--dry-run", "-o", "text")
    assert "would change: Pipeline default/linear" in changed.stdout, changed.stdout
    assert "tags" in changed.stdout

    exported = cli(server, "pipelines", "export", "linear")
    assert exported.returncode == 0 and "name: linear" in exported.stdout

    broken = tmp_path / "broken.yaml"
    broken.write_text((EXAMPLES / "linear.yaml").read_text().replace("core.echo", "core.nope", 1))
    refused = cli(server, "apply", "-f", str(broken))
    assert refused.returncode == 1
    assert "spec.steps" in refused.stderr and "Traceback" not in refused.stderr

    headers = {"Authorization": f"Bearer {TOKEN}"}
    base = f"{server['DIRIGENT_URL']}/api/v1/namespaces/default/pipelines"
    failed = httpx.post(f"{base}/error-handler/$run", json={}, headers=headers).json()["run_id"]
    watched = cli(server, "runs", "show", str(failed), "--watch", "-o", "json")
    assert watched.returncode == 1, watched.stderr  # the run's outcome
    steps = [r for r in records(watched) if r["kind"] == "step"]
    assert steps and all({"step", "status", "item"} <= set(r) for r in steps)
    logs = cli(server, "runs", "logs", str(failed), "--follow", "-o", "json")
    assert records(logs)[-1] == {"kind": "end", "run": failed, "status": "failed"}
    assert any(r["kind"] == "log" and r["step"] == "load" for r in records(logs))
    retried = cli(server, "runs", "retry", str(failed), "load", "--key", "k1", "-o", "json")
    assert retried.returncode == 0, retried.stderr
    assert records(retried)[0]["step"] == "load"
    shown = cli(server, "runs", "list", "--pipeline", "error-handler", "-o", "json")
    assert [r["id"] for r in records(shown)] == [failed]

    cancelled = cli(server, "runs", "cancel", "999999")
    assert cancelled.returncode == 1
    assert (
        cancelled.stderr.startswith("error: run.not_found") and "Traceback" not in cancelled.stderr
    )

    args = ["backfill", "nightly-report", "--schedule", "nightly-report"]
    window = ["--from", "2026-01-01", "--to", "2026-01-03"]
    dry = cli(server, *args, *window, "--dry-run", "-o", "json")
    assert dry.returncode == 0, dry.stderr
    assert (records(dry)[0]["created"], records(dry)[0]["dry_run"]) == (2, True)
    made = cli(server, *args, *window, "-o", "json")
    assert made.returncode == 0, made.stderr
    ids = [w["run_id"] for w in records(made)[0]["windows"]]
    backfilled = cli(server, "runs", "list", "--trigger", "backfill", "-o", "json")
    assert sorted(r["id"] for r in records(backfilled)) == sorted(ids)


def test_unreachable_server_and_missing_target_are_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIRIGENT_")}
    gone = cli({**env, "DIRIGENT_URL": f"http://127.0.0.1:{free_port()}"}, "runs", "list")
    assert gone.returncode == 3 and gone.stderr.startswith("error: cannot reach")
    nothing = subprocess.run(
        [sys.executable, "-m", "dirigent.cli", "pipelines", "list"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert nothing.returncode == 2 and "no server" in nothing.stderr
