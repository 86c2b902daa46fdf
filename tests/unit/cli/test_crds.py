"""``dirigent crds``: writes exactly the generated files; ``--check`` fails on any drift."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from dirigent.cli.main import app
from dirigent.operator import crds


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout + result.stderr


def test_writes_one_file_per_kind(tmp_path: Path) -> None:
    code, _ = _run("crds", "--out", str(tmp_path))
    assert code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "dirigent.dev_connections.yaml",
        "dirigent.dev_pipelines.yaml",
        "dirigent.dev_schedules.yaml",
        "dirigent.dev_webhooks.yaml",
    ]
    assert (tmp_path / "dirigent.dev_pipelines.yaml").read_text() == crds.render_all()[
        "dirigent.dev_pipelines.yaml"
    ]


def test_check_passes_when_up_to_date(tmp_path: Path) -> None:
    _run("crds", "--out", str(tmp_path))
    code, out = _run("crds", "--out", str(tmp_path), "--check")
    assert code == 0
    assert "up to date" in out


def test_check_fails_with_a_diff_on_drift(tmp_path: Path) -> None:
    _run("crds", "--out", str(tmp_path))
    target = tmp_path / "dirigent.dev_webhooks.yaml"
    target.write_text(target.read_text().replace("maxLength: 63", "maxLength: 64"))
    before = {p.name: p.read_text() for p in tmp_path.iterdir()}
    code, out = _run("crds", "--out", str(tmp_path), "--check")
    assert code == 1
    assert "-                maxLength: 64" in out
    assert "+                maxLength: 63" in out
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == before  # --check writes nothing


def test_check_reports_missing_and_stale_files(tmp_path: Path) -> None:
    _run("crds", "--out", str(tmp_path))
    (tmp_path / "dirigent.dev_pipelines.yaml").unlink()
    (tmp_path / "dirigent.dev_runs.yaml").write_text("old\n")
    (tmp_path / "kustomization.yaml").write_text("not ours\n")
    code, out = _run("crds", "--out", str(tmp_path), "--check")
    assert code == 1
    assert "missing: " in out
    assert "stale (no such kind): " in out
    assert "kustomization" not in out


def test_writing_removes_stale_files_but_not_others(tmp_path: Path) -> None:
    (tmp_path / "dirigent.dev_runs.yaml").write_text("old\n")
    (tmp_path / "kustomization.yaml").write_text("not ours\n")
    code, _ = _run("crds", "--out", str(tmp_path))
    assert code == 0
    assert not (tmp_path / "dirigent.dev_runs.yaml").exists()
    assert (tmp_path / "kustomization.yaml").exists()
