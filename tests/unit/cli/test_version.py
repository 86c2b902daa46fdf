"""``dirigent --version`` prints the version; a client command loads only what it uses."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

from typer.testing import CliRunner

from dirigent.cli.main import app


def test_version_prints_the_distribution_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"dirigent {version('dirigent')}"


def test_a_client_command_does_not_load_the_server_side() -> None:
    # `dirigent runs …` talks HTTP: loading FastAPI, kopf or SQLAlchemy would cost seconds.
    code = (
        "import sys; from dirigent.cli.main import build; build('runs'); "
        "print(sorted(m for m in ('fastapi', 'kopf', 'sqlalchemy', 'asyncpg') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
