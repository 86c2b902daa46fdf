"""``dirigent run FILE --local`` as a person or a script runs it: a subprocess, a throwaway
instance, NDJSON on stdout (stdout is a pipe here), diagnostics on stderr, the run's outcome
as the exit code — over every example in ``examples/``."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"

MODELLING_SECRET = """
apiVersion: v1
kind: Secret
metadata: {name: modelling-api}
stringData: {token: s3cret}
"""


def dirigent(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dirigent.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=240,
        check=False,
    )


def records(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in done.stdout.splitlines()]


@dataclass(frozen=True)
class Expect:
    """What running an example reaches: the run's status, the exit code, step outcomes."""

    status: str
    exit: int
    steps: dict[str, str] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    secrets: bool = False


# Every file in examples/ must be here: a new example is a new row.
EXPECT: dict[str, Expect] = {
    "alerts.yaml": Expect("succeeded", 0, {"work": "succeeded"}),
    "connection.yaml": Expect("succeeded", 0, {"ingest": "succeeded"}, secrets=True),
    "error-handler.yaml": Expect("failed", 1, {"load": "failed", "notify": "succeeded"}),
    "escape.yaml": Expect("succeeded", 0, {"render": "succeeded"}),
    "fan-out.yaml": Expect("succeeded", 0, {"push": "succeeded", "confirm": "succeeded"}),
    # A Schedule alone: there is no pipeline in the file to run.
    "interval-schedule.yaml": Expect("refused", 2),
    "linear.yaml": Expect(
        "succeeded", 0, {"extract": "succeeded", "transform": "succeeded", "load": "succeeded"}
    ),
    "retry.yaml": Expect("succeeded", 0, {"flaky": "succeeded"}),
    "schedule.yaml": Expect(
        "succeeded",
        0,
        {"report": "succeeded"},
        args=("-p", "audience=operations", "--window", "2025-01-01T05:00Z..2025-01-02T05:00Z"),
    ),
    "sensor-skip.yaml": Expect("succeeded", 0, {"wait_for_drop": "succeeded", "load": "succeeded"}),
    "webhook.yaml": Expect("succeeded", 0, {"ingest": "succeeded"}, args=("-p", "day=2025-01-01")),
}


def test_every_example_has_an_expected_outcome() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.yaml")) == sorted(EXPECT)


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_example_reaches_its_expected_outcome(name: str, tmp_path: Path) -> None:
    expect = EXPECT[name]
    args = ["run", str(EXAMPLES / name), "--local", *expect.args]
    if expect.secrets:
        secret = tmp_path / "secrets.yaml"
        secret.write_text(MODELLING_SECRET)
        args += ["--secrets", str(secret)]
    done = dirigent(*args)
    assert done.returncode == expect.exit, done.stderr
    out = records(done)
    assert all("kind" in r for r in out)
    assert out[-1]["kind"] == "result"
    assert out[-1]["status"] == expect.status and out[-1]["exit"] == expect.exit
    final_step = {r["step"]: r["status"] for r in out if r["kind"] == "step"}
    assert final_step == expect.steps
    for r in out:
        if r["kind"] == "step":
            assert {"step", "status", "item"} <= r.keys()
    if expect.status == "succeeded":
        assert any(r["kind"] == "run" and r["status"] == "succeeded" for r in out)


def test_a_failed_run_carries_its_diagnosis() -> None:
    done = dirigent("run", "examples/error-handler.yaml", "--local", "-o", "json")
    assert done.returncode == 1
    failures = [r for r in records(done) if r["kind"] == "failure"]
    assert [(f["step"], f["block"], f["error_code"]) for f in failures] == [
        ("load", "core.fail", "core.fail.requested")
    ]


def test_text_output_streams_steps_and_the_diagnosis() -> None:
    done = dirigent("run", "examples/error-handler.yaml", "--local", "--output", "text")
    assert done.returncode == 1
    assert "step load: failed" in done.stdout.splitlines()
    assert done.stdout.splitlines()[-1] == "run failed"
    assert "failed: step load (block core.fail, attempt 1)" in done.stderr
    assert "code core.fail.requested" in done.stderr


def test_a_connection_without_its_secret_is_refused_with_the_location() -> None:
    done = dirigent("run", "examples/connection.yaml", "--local")
    assert done.returncode == 2
    assert "examples/connection.yaml#0: spec.secrets.token" in done.stderr
    assert "[secret.not_found]" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_secret_in_the_same_file_resolves_the_connection(tmp_path: Path) -> None:
    both = tmp_path / "both.yaml"
    body = (EXAMPLES / "connection.yaml").read_text()
    both.write_text(body + "\n---\n" + MODELLING_SECRET)
    done = dirigent("run", str(both), "--local")
    assert done.returncode == 0, done.stderr
    assert records(done)[-1]["status"] == "succeeded"


def test_a_refused_document_exits_two_with_located_problems(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: bad}
spec:
  steps:
    a: {block: core.noop, dependsOn: [nope]}
""")
    done = dirigent("run", str(bad), "--local")
    assert done.returncode == 2
    assert "spec.steps.a.dependsOn[0]" in done.stderr
    assert "pipeline.dependency.unknown" in done.stderr
    assert records(done)[-1] == {
        "kind": "result",
        "run": None,
        "pipeline": None,
        "status": "refused",
        "exit": 2,
    }


def test_params_are_built_against_the_schema() -> None:
    done = dirigent(
        "run", "examples/fan-out.yaml", "--local", "-p", "regions[0]=x", "-p", "regions[]=y"
    )
    assert done.returncode == 0, done.stderr
    push_items = {
        r["item"]
        for r in records(done)
        if r["kind"] == "attempt" and r["step"] == "push" and r["status"] == "succeeded"
    }
    assert push_items == {0, 1}


def test_an_unknown_param_is_refused_before_anything_starts() -> None:
    done = dirigent("run", "examples/fan-out.yaml", "--local", "-p", "regoins=[1]")
    assert done.returncode == 2
    assert "params.regoins: 'regoins' is not a parameter of this pipeline" in done.stderr
    assert "[run.params.path.unknown]" in done.stderr


def test_a_missing_file_is_one_line_and_exit_two(tmp_path: Path) -> None:
    done = dirigent("run", str(tmp_path / "nope.yaml"), "--local")
    assert done.returncode == 2
    assert "no such file or folder" in done.stderr
    assert "Traceback" not in done.stderr
