"""`dirigent migrate` in a subprocess, as the Helm hook Job runs it.

The revision it reached is read back from the row Alembic keeps, and compared with the one
this release expects (``Engine.schema_head``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dirigent.engine import EmbeddedPostgres, Engine
from tests.support.postgres import create_database, schema_revision

pytestmark = pytest.mark.integration

DIRIGENT = Path(sys.executable).parent / "dirigent"


def _migrate(url: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIRIGENT_")}
    if url is not None:
        env["DIRIGENT_DATABASE_URL"] = url
    return subprocess.run(
        [str(DIRIGENT), "migrate"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


async def test_migrate_empty_database_then_nothing_to_do(pg_server: EmbeddedPostgres) -> None:
    await create_database(pg_server, "cli_migrate")
    # A plain postgresql:// URL, as people write it, is accepted too.
    url = pg_server.url_for("cli_migrate", driver="")

    first = _migrate(url)
    assert first.returncode == 0, first.stderr
    assert f"(empty database) -> {Engine.schema_head()}" in first.stdout
    assert await schema_revision(url) == Engine.schema_head()

    second = _migrate(url)
    assert second.returncode == 0, second.stderr
    assert "nothing to do" in second.stdout


def test_migrate_without_url_fails_clearly() -> None:
    done = _migrate(None)
    assert done.returncode == 2
    assert "DIRIGENT_DATABASE_URL is not set" in done.stderr
