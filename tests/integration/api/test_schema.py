"""Schemathesis against the served OpenAPI document: no server errors, no response that
breaks its own schema, every refusal a documented Problem.

The API runs as a real ``dirigent api`` process (static token) on a migrated database with a
pipeline and a finished run in it, so generated requests reach real rows as well as misses.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.postgres import DatabaseFactory
from tests.support.servers import free_port
from tests.support.waiting import wait_until

# One xdist worker runs the module: its API server (a module fixture) starts once, not per worker.
pytestmark = pytest.mark.xdist_group("api-schema")

TOKEN = "schema-test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PIPELINE = {
    "apiVersion": "dirigent.dev/v1alpha1",
    "kind": "Pipeline",
    "metadata": {"name": "hello"},
    "spec": {"steps": {"first": {"block": "core.echo", "config": {"value": 1}}}},
}


def _wait_ready(url: str, process: subprocess.Popen[bytes], timeout: float) -> None:
    def ready() -> int | str:
        if process.poll() is not None:
            raise RuntimeError(
                f"dirigent api exited: {process.stderr.read() if process.stderr else b''!r}"
            )
        try:
            return httpx.get(f"{url}/health/ready", timeout=1).status_code
        except httpx.TransportError as err:
            return repr(err)

    wait_until(ready, lambda answer: answer == 200, timeout=timeout, what="dirigent api ready")


@pytest.fixture(scope="module")
def api_url(
    database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    db_url = database_factory.create()
    port = free_port()
    env = {
        **os.environ,
        "DIRIGENT_DATABASE_URL": db_url,
        "DIRIGENT_ARTIFACT_ROOT": str(tmp_path_factory.mktemp("artifacts")),
        "DIRIGENT_METRICS_PORT": "0",
        "DIRIGENT_API_TOKEN": TOKEN,
    }
    command = [sys.executable, "-m", "dirigent.cli", "api", "--auth", "static"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--stream-lifetime", "0.5"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process, timeout=60)
        _seed(url)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        database_factory.drop(db_url)


def _seed(url: str) -> None:
    with httpx.Client(base_url=f"{url}/api/v1/namespaces/default", headers=AUTH) as http:
        assert http.post("/pipelines/$apply", json=PIPELINE).status_code == 200
        assert http.post("/pipelines/hello/$run", json={}).status_code == 201


def test_every_operation_answers_within_its_schema(api_url: str, tmp_path: Path) -> None:
    # The schemathesis CLI, not its pytest plugin (whose loader reaches into pytest internals
    # this pytest no longer has). Every check, fixed seed, and a report of what it found.
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "run",
        f"{api_url}/openapi.json",
        "--header",
        f"Authorization: Bearer {TOKEN}",
        "--checks",
        "all",
        # A schema-valid request may still be refused for what no schema can say: an opaque
        # cursor this server never handed out, a manifest the engine finds invalid, params
        # checked against the pipeline's own schema. Those are 422 Problems by design.
        "--exclude-checks",
        "positive_data_acceptance",
        "--max-examples",
        "25",
        "--seed",
        "20261202",
        "--workers",
        "1",
        "--request-timeout",
        "30",
        "--report-dir",
        str(tmp_path),
    ]
    done = subprocess.run(  # in tmp_path: schemathesis keeps a cache in its working directory
        command, capture_output=True, text=True, timeout=900, check=False, cwd=tmp_path
    )
    (tmp_path / "schemathesis.out").write_text(done.stdout + done.stderr)
    assert done.returncode == 0, f"see {tmp_path / 'schemathesis.out'}\n" + done.stdout[-20000:]
    assert "No issues found" in done.stdout or "passed" in done.stdout, done.stdout[-5000:]


def test_the_document_is_the_committed_one(api_url: str) -> None:
    committed = Path(__file__).parents[3] / "docs" / "openapi.json"
    import json

    assert httpx.get(f"{api_url}/openapi.json").json() == json.loads(committed.read_text())
