"""``dirigent run FILE --local`` as a person runs it: a subprocess, a throwaway instance,
progress on stdout, the diagnosis on stderr, the run's outcome as the exit code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[3]


def dirigent(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dirigent.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=180,
        check=False,
    )


def test_a_succeeding_example_exits_zero_and_streams_its_steps() -> None:
    done = dirigent("run", "examples/linear.yaml", "--local")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "run succeeded"
    for step in ("extract", "transform", "load"):
        assert f"step {step}: succeeded" in lines
    assert lines.index("step extract: succeeded") < lines.index("step transform: running")


def test_a_failing_run_exits_one_with_the_diagnosis() -> None:
    done = dirigent("run", "examples/error-handler.yaml", "--local")
    assert done.returncode == 1
    assert "run failed" in done.stdout
    assert "failed: step load (block core.fail, attempt 1)" in done.stderr
    assert "code core.fail.requested" in done.stderr


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
    assert (
        "spec.steps.a.dependsOn[0]" in done.stderr and "pipeline.dependency.unknown" in done.stderr
    )


def test_params_are_given_with_p(tmp_path: Path) -> None:
    done = dirigent("run", "examples/fan-out.yaml", "--local", "-p", 'regions=["x","y","z"]')
    assert done.returncode == 0, done.stderr
    assert "step push: succeeded (3/3 items)" in done.stdout
