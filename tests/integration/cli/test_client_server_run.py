"""``dirigent run NAME`` on a server, ``apply -f`` of every kind with its Secrets, ``-o yaml`` and
profiles: real subprocesses against one real ``dirigent dev`` on a real port."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.support.dev import EXAMPLES, Dev
from tests.support.servers import free_port

# One xdist worker runs the module: its `dirigent dev` (a module fixture) starts once.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("client-server-run")]
TOKEN = "server-run-token-0123456789"
SECRET = """apiVersion: v1
kind: Secret
metadata: {name: modelling-api}
stringData: {token: s3cret}
"""


@pytest.fixture(scope="module")
def server() -> Iterator[dict[str, str]]:
    """One ``dirigent dev`` for the module (an empty folder: everything comes through the API).
    Its state lives outside pytest's tree (see ``test_dev.state``)."""
    outside = Path(tempfile.mkdtemp(prefix="dirigent-cli-run-"))
    outside.chmod(0o755)
    (outside / "served").mkdir()
    dev = Dev(outside / "served", outside / ".dirigent", free_port(), TOKEN)
    try:
        ready = dev.expect(lambda r: r["kind"] == "ready")
        env = {k: v for k, v in os.environ.items() if not k.startswith("DIRIGENT_")}
        yield {**env, "DIRIGENT_URL": ready["url"], "DIRIGENT_TOKEN": TOKEN}
    finally:
        assert dev.stop() == 0
        shutil.rmtree(outside, ignore_errors=True)


def cli(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "dirigent.cli", *args]
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=180)


def records(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in done.stdout.splitlines()]


def one_line_error(done: subprocess.CompletedProcess[str], code: int) -> str:
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert done.stderr.startswith("error: ") and "Traceback" not in done.stderr, done.stderr
    return done.stderr


def test_run_by_name_builds_params_against_the_servers_schema_and_follows(
    server: dict[str, str], tmp_path: Path
) -> None:
    for example in ("webhook.yaml", "error-handler.yaml"):
        applied = cli(server, tmp_path, "apply", "-f", str(EXAMPLES / example), "-o", "json")
        assert applied.returncode == 0, applied.stderr

    watched = cli(server, tmp_path, "run", "ingest-day", "-p", "day=2026-02-01", "--watch")
    assert watched.returncode == 0, watched.stderr
    lines = records(watched)
    assert lines[-1]["kind"] == "result" and lines[-1]["status"] == "succeeded"
    assert lines[-1]["exit"] == 0 and lines[-1]["pipeline"] == "ingest-day"
    steps = [r for r in lines if r["kind"] == "step"]
    assert steps and all({"step", "status", "item"} <= set(r) for r in steps)
    assert ("ingest", "succeeded") in {(r["step"], r["status"]) for r in steps}

    # Without --watch: the run's id, at once, exit 0; the server has it with its typed params.
    started = cli(server, tmp_path, "run", "ingest-day", "-p", "day=2026-02-02", "-p", "source=x")
    assert started.returncode == 0, started.stderr
    (created,) = records(started)
    assert created["kind"] == "run" and created["created"] is True
    shown = cli(server, tmp_path, "runs", "show", str(created["run_id"]), "-o", "json")
    assert records(shown)[0]["params"] == {"day": "2026-02-02", "source": "x"}

    # A failing run's outcome is the exit code, as with --local.
    failed = cli(server, tmp_path, "run", "error-handler", "--watch", "-o", "json")
    assert failed.returncode == 1 and records(failed)[-1]["status"] == "failed"

    # Refusals: one line, exit 2 (a parameter off the schema, with its location; no pipeline;
    # a file without --local; a local-only flag).
    bad = cli(server, tmp_path, "run", "ingest-day", "-p", "dya=2026-02-01")
    assert "dya" in one_line_error(bad, 2)
    one_line_error(cli(server, tmp_path, "run", "no-such-pipeline"), 2)
    one_line_error(cli(server, tmp_path, "run", str(EXAMPLES / "linear.yaml")), 2)
    one_line_error(
        cli(server, tmp_path, "run", "ingest-day", "--window", "2026-01-01..2026-01-02"), 2
    )


def test_apply_sends_connections_and_webhooks_with_their_secrets(
    server: dict[str, str], tmp_path: Path
) -> None:
    files = tmp_path / "manifests"
    files.mkdir()
    shutil.copy(EXAMPLES / "connection.yaml", files / "connection.yaml")
    # A Webhook of its own: the module's server may already hold the example's (and its token).
    webhook = (EXAMPLES / "webhook.yaml").read_text()
    (files / "webhook.yaml").write_text(webhook.replace("name: upstream-publish", "name: own-hook"))

    # Without the Secret the Connection is refused, located; the Pipeline that requires it
    # is refused for that reason, and nothing else is held back.
    missing = cli(server, tmp_path, "apply", "-f", str(files), "-o", "json")
    assert missing.returncode == 1
    problems = [r for r in records(missing) if r["kind"] == "problem"]
    assert [(p["code"], p["location"]) for p in problems] == [
        ("secret.not_found", "spec.secrets.token"),
        ("pipeline.connection.unknown", "spec.requires.connections[0]"),
    ]
    assert "connection.yaml#0" in missing.stderr and "Traceback" not in missing.stderr
    held = {(r["manifest"], r["name"]) for r in records(missing) if r["kind"] == "applied"}
    assert ("Webhook", "own-hook") in held
    # The Webhook was new: its token was minted here and kept owner-only, never printed.
    (minted,) = [r for r in records(missing) if r["kind"] == "token"]
    token_file = tmp_path / minted["file"]
    assert token_file.stat().st_mode & 0o777 == 0o600
    token = token_file.read_text().strip()
    assert token not in missing.stdout + missing.stderr

    (files / "secret.yaml").write_text(SECRET)
    done = cli(server, tmp_path, "apply", "-f", str(files), "-o", "json")
    assert done.returncode == 0, done.stderr
    kinds = {(r["manifest"], r["name"]) for r in records(done) if r["kind"] == "applied"}
    assert {("Connection", "modelling-api"), ("Pipeline", "ingest-regions")} <= kinds
    assert not [r for r in records(done) if r["kind"] == "token"]  # the server keeps its token

    base = server["DIRIGENT_URL"]
    headers = {"Authorization": f"Bearer {TOKEN}"}
    connection = httpx.get(
        f"{base}/api/v1/namespaces/default/connections/modelling-api", headers=headers
    )
    assert connection.status_code == 200 and "s3cret" not in connection.text
    payload = {"published": {"date": "2026-03-01"}, "publisher": {"name": "cli"}}
    accepted = httpx.post(f"{base}/hooks/{token}", json=payload)
    assert accepted.status_code == 202, accepted.text

    # Applied again: every document unchanged, the webhook keeps its token (no new one).
    again = cli(server, tmp_path, "apply", "-f", str(files), "-o", "json")
    assert again.returncode == 0, again.stderr
    assert {r["action"] for r in records(again) if r["kind"] == "applied"} == {"unchanged"}
    assert not [r for r in records(again) if r["kind"] == "token"]
    # A rotated Secret re-seals the Connection.
    (files / "secret.yaml").write_text(SECRET.replace("s3cret", "rotated"))
    rotated = cli(
        server,
        tmp_path,
        "apply",
        "-f",
        str(files / "connection.yaml"),
        "-f",
        str(files / "secret.yaml"),
        "-o",
        "json",
    )
    actions = {r["name"]: r["action"] for r in records(rotated) if r["kind"] == "applied"}
    assert actions["modelling-api"] == "updated", rotated.stderr


def test_yaml_and_json_output_are_the_api_models(server: dict[str, str], tmp_path: Path) -> None:
    assert cli(server, tmp_path, "apply", "-f", str(EXAMPLES / "linear.yaml")).returncode == 0
    as_yaml = cli(server, tmp_path, "pipelines", "show", "linear", "-o", "yaml")
    assert as_yaml.returncode == 0, as_yaml.stderr
    (doc,) = list(yaml.safe_load_all(as_yaml.stdout))
    assert doc["kind"] == "pipeline" and doc["summary"]["name"] == "linear"
    assert doc["document"]["spec"]["steps"]["load"]["block"] == "core.noop"
    as_json = cli(server, tmp_path, "pipelines", "show", "linear", "-o", "json")
    assert records(as_json) == [doc]  # the same record, either way

    listed = cli(server, tmp_path, "pipelines", "list", "-o", "yaml")
    names = [d["name"] for d in yaml.safe_load_all(listed.stdout)]
    assert "linear" in names and all(d for d in yaml.safe_load_all(listed.stdout))
    text = cli(server, tmp_path, "pipelines", "list", "-o", "text")
    assert text.stdout.splitlines()[0].split()[:3] == ["name", "version", "active"]


def test_a_profile_names_the_server_and_one_naming_a_database_is_refused(
    server: dict[str, str], tmp_path: Path
) -> None:
    env = {k: v for k, v in server.items() if not k.startswith("DIRIGENT_")}
    (tmp_path / ".dirigent").mkdir()
    profiles = tmp_path / ".dirigent" / "profiles.yaml"
    profiles.write_text(
        yaml.safe_dump(
            {
                "default": "dev",
                "profiles": {
                    "dev": {"url": server["DIRIGENT_URL"], "token_env": "MY_DEV_TOKEN"},
                    "db": {"url": "postgresql://dirigent@localhost/dirigent"},
                    "dsn": {"url": server["DIRIGENT_URL"], "database_url": "postgres://x/y"},
                },
            }
        )
    )
    listed = cli({**env, "MY_DEV_TOKEN": TOKEN}, tmp_path, "pipelines", "list", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    for name in ("db", "dsn"):
        refused = cli(env, tmp_path, "pipelines", "list", "--profile", name)
        assert "database" in one_line_error(refused, 2)
    wrong_token = cli({**env, "MY_DEV_TOKEN": "x" * 20}, tmp_path, "runs", "list")
    assert "DIRIGENT_TOKEN" in one_line_error(wrong_token, 1)


SLEEPER = """apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: sleeper}
spec:
  steps:
    nap: {block: core.sleep, config: {seconds: 600}}
"""


def test_a_running_run_is_cancelled_and_its_watch_exits_with_the_outcome(
    server: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "sleeper.yaml").write_text(SLEEPER)
    assert cli(server, tmp_path, "apply", "-f", str(tmp_path / "sleeper.yaml")).returncode == 0
    started = cli(server, tmp_path, "run", "sleeper", "-o", "json")
    assert started.returncode == 0, started.stderr
    run_id = str(records(started)[0]["run_id"])

    cancelled = cli(server, tmp_path, "runs", "cancel", run_id, "--reason", "test", "-o", "yaml")
    assert cancelled.returncode == 0, cancelled.stderr
    receipt = yaml.safe_load(cancelled.stdout)
    assert receipt["kind"] == "cancel" and receipt["run_id"] == int(run_id)
    watched = cli(server, tmp_path, "runs", "show", run_id, "--watch", "-o", "json")
    assert watched.returncode == 1, watched.stderr  # a cancelled run is not a success
    final = cli(server, tmp_path, "runs", "show", run_id, "-o", "json")
    assert records(final)[0]["status"] == "cancelled"
