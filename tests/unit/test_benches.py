"""Every bench starts: its imports resolve and its arguments parse (``--help``).

The benches are scripts, outside mypy's packages, run by hand on a quiet machine; a moved
store function once broke one unnoticed until the day its figures were needed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(p for p in (ROOT / "bench").glob("*.py") if "__main__" in p.read_text())


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_the_bench_starts(script: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(script), "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout


def test_cpu_counts_a_process_time_and_finds_a_servers_children(tmp_path: Path) -> None:
    """``bench/cpu.py`` reads /proc: a busy loop shows as user time, and a "server" is the
    pid in its pid file with every process that pid started."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import cpu
    finally:
        sys.path.remove(str(ROOT / "bench"))
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (tmp_path / "postmaster.pid").write_text(f"{os.getpid()}\n{tmp_path}\n")
        before = cpu.snapshot([os.getpid()], tmp_path)
        assert set(before.server) >= {os.getpid(), child.pid}
        deadline = time.process_time() + 0.3
        while time.process_time() < deadline:
            pass
        after = cpu.snapshot([os.getpid()], tmp_path)
        line = cpu.per_attempt(before, after, 1)
        spent = after.workers[os.getpid()] - before.workers[os.getpid()]
        assert spent.user + spent.system >= 0.2, spent
        assert line.startswith("  cpu per attempt: workers user ")
        assert cpu.process_usage(2**22 + 7) == cpu.Usage()  # gone: nothing, no error
    finally:
        child.kill()
        child.wait()
