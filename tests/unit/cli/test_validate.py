"""``dirigent validate``: exit codes, the human line format, and the JSON shape tools read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from dirigent.cli.main import app

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"
BROKEN = REPO / "tests" / "fixtures" / "broken"


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_the_examples_validate_clean() -> None:
    code, out, _ = _run("validate", str(EXAMPLES))
    assert code == 0
    assert out.strip().endswith("documents, no problems")


def test_the_broken_fixtures_exit_1_with_every_problem_on_its_own_line() -> None:
    code, out, err = _run("validate", str(BROKEN))
    assert code == 1
    lines = out.splitlines()
    assert f"{BROKEN / 'cycle.yaml'}#0: spec.steps.a.dependsOn: " in "\n".join(lines)
    assert all(line.endswith("]") for line in lines)
    assert len(lines) >= len(list(BROKEN.glob("*.yaml")))
    assert "problems" in err


def test_json_output_is_a_list_of_problem_objects() -> None:
    code, out, _ = _run("validate", "--output", "json", str(BROKEN / "unknown-field.yaml"))
    assert code == 1
    (problem,) = json.loads(out)
    assert problem["code"] == "manifest.field.unknown"
    assert problem["location"] == "spec.steps.load.dependOn"
    assert problem["file"] == str(BROKEN / "unknown-field.yaml")
    assert problem["document"] == 0
    assert set(problem) >= {"code", "message", "location", "file", "document"}


def test_json_output_is_an_empty_list_when_clean() -> None:
    code, out, _ = _run("validate", "-o", "json", str(EXAMPLES / "linear.yaml"))
    assert code == 0
    assert json.loads(out) == []


def test_a_missing_path_is_a_problem(tmp_path: Path) -> None:
    code, out, _ = _run("validate", str(tmp_path / "nope.yaml"))
    assert code == 1
    assert "[manifest.file.missing]" in out


def test_files_and_folders_mix(tmp_path: Path) -> None:
    code, out, _ = _run("validate", str(EXAMPLES / "linear.yaml"), str(EXAMPLES / "webhook.yaml"))
    assert code == 0
    assert out.strip() == "3 documents, no problems"


def test_the_installed_command_runs() -> None:
    dirigent = Path(sys.executable).parent / "dirigent"
    ok = subprocess.run(
        [str(dirigent), "validate", "examples/"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    broken = subprocess.run(
        [str(dirigent), "validate", str(BROKEN)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert broken.returncode == 1
