"""Every bench starts: its imports resolve and its arguments parse (``--help``).

The benches are scripts, outside mypy's packages, run by hand on a quiet machine; a moved
store function once broke one unnoticed until the day its figures were needed.
"""

from __future__ import annotations

import subprocess
import sys
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
