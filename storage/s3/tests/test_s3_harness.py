"""The S3 server these tests stand on (``e2e.harness.s3``), as ``make s3-up`` / ``s3-down`` use it.

Why test the harness: a server that listened beyond loopback, leaked its process or its
sockets, or printed exports a shell cannot use would go unnoticed by the backend's tests,
which only ever talk to it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import botocore.session

from e2e.harness.processes import Process
from e2e.harness.s3 import REPO_ROOT, read_state

EXPORTS = (
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_REGION",
    "DIRIGENT_S3_BUCKET",
)


def _harness(*args: str, state_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "e2e.harness.s3", *args, "--state-dir", str(state_dir)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )


def _listening_addresses(pid: int) -> list[str]:
    """The local addresses of ``pid``'s listening TCP sockets, as /proc spells them."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd)
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                found.append(fields[1].split(":")[0])
    return found


def test_up_prints_usable_exports_listens_on_loopback_only_and_down_cleans_up(
    tmp_path: Path,
) -> None:
    up = _harness("up", state_dir=tmp_path)
    lines = up.stdout.splitlines()
    assert [line.split("=", 1)[0] for line in lines] == [f"export {n}" for n in EXPORTS]
    env = dict(line.removeprefix("export ").split("=", 1) for line in lines)
    pointer = read_state(tmp_path)
    assert pointer is not None
    state = read_state(Path(pointer["workdir"]))
    assert state is not None
    process = Process.from_state(state["process"])
    workdir = Path(state["workdir"])
    try:
        assert process.running()
        listening = _listening_addresses(process.pid)
        assert len(listening) >= 5  # master, volume, filer and S3, each HTTP and gRPC
        assert set(listening) == {"0100007F"}, f"weed listens beyond 127.0.0.1: {listening}"
        client: Any = botocore.session.get_session().create_client(
            "s3",
            endpoint_url=env["AWS_ENDPOINT_URL"],
            region_name=env["AWS_REGION"],
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        )
        buckets = [b["Name"] for b in client.list_buckets()["Buckets"]]
        assert env["DIRIGENT_S3_BUCKET"] in buckets
        client.close()
    finally:
        down = _harness("down", state_dir=tmp_path)
    assert "stopped the S3 server" in down.stderr
    assert not process.running()
    assert not workdir.exists()
    assert not any(Path(s).exists() for s in state["sockets"])
    assert read_state(tmp_path) is None
