"""The embedded server: restarts on its data, stops cleanly, never runs as root.

A unit test of ``infrastructure.embedded`` itself: it imports the module below the door on purpose.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from dirigent.engine.infrastructure.embedded import (
    DEFAULT_OS_USER,
    EmbeddedPostgres,
    EmbeddedPostgresError,
    embedded_postgres,
    embedded_postgres_async,
)

pytestmark = pytest.mark.integration

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="exercises the root-only path")


async def _fetch(server: EmbeddedPostgres, sql: str) -> object:
    connection = await asyncpg.connect(server.dsn)
    try:
        return await connection.fetchval(sql)
    finally:
        await connection.close()


def _stopped(pid: int, data: Path) -> bool:
    return not Path(f"/proc/{pid}").exists() and not (data / "postmaster.pid").exists()


async def test_restart_keeps_data_and_stop_is_clean(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with embedded_postgres_async(data) as server:
        pid = server.pid
        assert await _fetch(server, "SHOW fsync") == "off"
        assert await _fetch(server, "SHOW max_connections") == "200"
        await _fetch(server, "CREATE TABLE kept AS SELECT 42 AS answer")
    assert pid is not None
    assert _stopped(pid, data)

    async with embedded_postgres_async(data) as again:
        assert await _fetch(again, "SELECT answer FROM kept") == 42


def test_second_server_on_same_data_dir_is_refused(tmp_path: Path) -> None:
    with embedded_postgres(tmp_path / "data") as server:
        with pytest.raises(EmbeddedPostgresError, match="already runs"):
            EmbeddedPostgres(tmp_path / "data").start()
        assert server.running


def test_url_forms(tmp_path: Path) -> None:
    server = EmbeddedPostgres(tmp_path / "data")
    with pytest.raises(EmbeddedPostgresError, match="not running"):
        _ = server.url
    with server:
        assert server.url == f"postgresql+asyncpg://postgres@127.0.0.1:{server.port}/postgres"
        assert server.dsn == f"postgresql://postgres@127.0.0.1:{server.port}/postgres"
        assert server.url_for("x").endswith(f":{server.port}/x")


@as_root
def test_as_root_the_server_runs_as_a_service_user(pg_server: EmbeddedPostgres) -> None:
    assert pg_server.pid is not None
    server_uid = Path(f"/proc/{pg_server.pid}").stat().st_uid
    assert server_uid != 0
    assert pg_server.data_dir.stat().st_uid == server_uid
    assert pwd.getpwuid(server_uid).pw_name == DEFAULT_OS_USER


@pytest.fixture
def outside_pytest_tree() -> Iterator[Path]:
    """A directory `nobody` can reach: pytest's own tree is 0700 and reset by every session."""
    path = Path(tempfile.mkdtemp(prefix="dirigent-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@as_root
def test_runs_as_a_normal_user(outside_pytest_tree: Path) -> None:
    # The interpreter may live where an unprivileged user cannot read it (/root/.pyenv), so
    # the child imports everything as root and then drops to `nobody` before starting.
    nobody = pwd.getpwnam("nobody")
    home = outside_pytest_tree / "home"
    home.mkdir()
    os.chown(home, nobody.pw_uid, nobody.pw_gid)
    script = textwrap.dedent(
        f"""
        import asyncio, os
        import asyncpg
        from dirigent.engine.infrastructure.embedded import EmbeddedPostgres, binaries_dir
        binaries_dir()
        os.environ["HOME"] = {str(home)!r}
        os.setgroups([]); os.setgid({nobody.pw_gid}); os.setuid({nobody.pw_uid})

        async def user(dsn):
            connection = await asyncpg.connect(dsn)
            try:
                return await connection.fetchval("SELECT current_user")
            finally:
                await connection.close()

        with EmbeddedPostgres({str(home / "data")!r}) as server:
            print(os.geteuid(), asyncio.run(user(server.dsn)))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(nobody.pw_uid), "postgres"]
    assert (home / "data" / "PG_VERSION").stat().st_uid == nobody.pw_uid


@as_root
def test_servers_starting_at_once_create_their_os_user_once() -> None:
    """pytest-xdist workers on a fresh machine start their first servers together: each finds
    or creates the service user, none fails on the others' useradd (it locks /etc/passwd)."""
    name = f"dirigent-t{uuid.uuid4().hex[:8]}"
    script = textwrap.dedent(
        f"""
        import sys
        from dirigent.engine.infrastructure.embedded import _ensure_os_user
        print("ready", flush=True)
        sys.stdin.readline()  # all start together, once every child has imported
        print(_ensure_os_user({name!r}).uid)
        """
    )
    children = [
        subprocess.Popen(
            [sys.executable, "-c", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    try:
        for child in children:
            assert child.stdout is not None and child.stdout.readline() == "ready\n"
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        done = [(child.communicate(timeout=60), child.returncode) for child in children]
    finally:
        for child in children:
            child.kill()
        subprocess.run(["userdel", name], capture_output=True, check=False)
    assert [code for _, code in done] == [0] * 4, [err for (_, err), _ in done]
    assert len({out for (out, _), _ in done}) == 1
