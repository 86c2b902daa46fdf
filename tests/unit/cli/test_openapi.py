"""``dirigent openapi``: the committed document and route table are current; ``--check``
fails, writing nothing, when either is stale; a file without the markers is refused."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from dirigent.cli.main import app

ROOT = Path(__file__).resolve().parents[3]


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["openapi", *args])
    return result.exit_code, result.stdout + result.stderr


def _copies(tmp_path: Path) -> tuple[Path, Path]:
    out, routes = tmp_path / "openapi.json", tmp_path / "api.md"
    shutil.copy(ROOT / "docs/openapi.json", out)
    shutil.copy(ROOT / "docs/api.md", routes)
    return out, routes


def test_the_committed_files_are_current() -> None:
    code, out = _run(
        "--check", "--out", str(ROOT / "docs/openapi.json"), "--routes", str(ROOT / "docs/api.md")
    )
    assert code == 0, out
    assert "up to date" in out


def test_check_fails_when_the_route_table_is_stale(tmp_path: Path) -> None:
    out, routes = _copies(tmp_path)
    row = "| POST | `/hooks/{token}` | Start the webhook's pipeline from a JSON payload |"
    committed = routes.read_text()
    assert row in committed
    stale = committed.replace(row, "| POST | `/hooks` | Start something |")
    routes.write_text(stale)
    code, text = _run("--check", "--out", str(out), "--routes", str(routes))
    assert code == 1
    assert f"{routes} is stale: run `dirigent openapi`" in text
    assert f"+{row}" in text and "-| POST | `/hooks` | Start something |" in text
    assert routes.read_text() == stale  # --check writes nothing
    code, _ = _run("--out", str(out), "--routes", str(routes))
    assert code == 0
    assert routes.read_text() == committed


def test_check_fails_when_the_document_is_stale_and_names_both(tmp_path: Path) -> None:
    out, routes = _copies(tmp_path)
    out.write_text("{}\n")
    routes.write_text(routes.read_text().replace("`get runs`", "`get everything`"))
    code, text = _run("--check", "--out", str(out), "--routes", str(routes))
    assert code == 1
    assert f"{out} and {routes} are stale" in text


def test_a_file_without_the_markers_is_refused(tmp_path: Path) -> None:
    out, routes = _copies(tmp_path)
    routes.write_text("# The REST API\n\nNo table here.\n")
    code, text = _run("--out", str(out), "--routes", str(routes))
    assert code == 2
    assert f"error: {routes}: needs one line <!-- routes:begin" in text
    assert "Traceback" not in text
    assert routes.read_text() == "# The REST API\n\nNo table here.\n"
