"""``dirigent --version`` prints the installed distribution's version and exits 0."""

from __future__ import annotations

from importlib.metadata import version

from typer.testing import CliRunner

from dirigent.cli.main import app


def test_version_prints_the_distribution_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"dirigent {version('dirigent')}"
