"""Fixtures for engine tests: ``h`` is a Harness on a fresh database."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.integration.engine.harness import Harness, harness


@pytest.fixture
async def h(db_url: str, tmp_path: Path) -> AsyncIterator[Harness]:
    async with harness(db_url, tmp_path / "artifacts") as found:
        yield found


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Worker processes a test started; stopped (SIGTERM, then SIGKILL) afterwards."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in started:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
