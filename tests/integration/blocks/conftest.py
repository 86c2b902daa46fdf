"""Fixtures for block tests: an engine harness (``h``) and a real HTTP server on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.harness import Harness, harness
from tests.support.servers import Server, recording_server

UNSAFE = ("shell.run", "docker.run")


@pytest.fixture
async def h(db_url: str, tmp_path: Path) -> AsyncIterator[Harness]:
    """An engine on a fresh database whose instance enables the code-running blocks."""
    async with harness(db_url, tmp_path / "artifacts", unsafe=UNSAFE) as found:
        yield found


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    """A loopback HTTP server whose routes the test sets; it records every request."""
    async with recording_server() as found:
        yield found
