"""`make unit` and `make e2e` run two pytest-xdist workers with `--dist loadgroup`: tests
marked with one `xdist_group` must run on one worker, one after another.

Why a test: the e2e real node exists once per machine and tests sharing it rely on their
group; pytest 9.2 with pytest-xdist 3.8 silently stopped grouping (xdist issue 1386: the group
rode on a node-id field pytest no longer reads), so an upgrade could bring that back unseen.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

GROUPED = """\
import os
import pytest


@pytest.mark.xdist_group("together")
@pytest.mark.parametrize("i", range(4))
def test_grouped(i: int) -> None:
    with open(os.environ["WORKERS_SEEN"], "a") as out:
        out.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")


@pytest.mark.parametrize("i", range(4))
def test_free(i: int) -> None:
    pass
"""


def test_an_xdist_group_runs_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    for name in ("a", "b"):
        (tmp_path / f"test_{name}.py").write_text(GROUPED)
    seen = tmp_path / "workers-seen.txt"
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2"]
    command += ["--dist", "loadgroup", "--rootdir", str(tmp_path), str(tmp_path)]
    done = subprocess.run(
        command,
        env={**os.environ, "WORKERS_SEEN": str(seen)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "16 passed" in done.stdout, done.stdout
    # Ungrouped, the eight grouped tests would be dealt out to both workers.
    workers = seen.read_text().split()
    assert len(workers) == 8 and len(set(workers)) == 1, workers
