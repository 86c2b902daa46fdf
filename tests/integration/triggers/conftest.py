"""Fixtures for trigger and alerting tests: an engine with a secret key (``h``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.harness import SECRET_KEY, Harness, harness, processes

__all__ = ["h", "processes"]


@pytest.fixture
async def h(db_url: str, tmp_path: Path) -> AsyncIterator[Harness]:
    """An engine on a fresh database, keyed (it seals webhook tokens and connections)."""
    async with harness(db_url, tmp_path / "artifacts", unsafe=(), secret_key=SECRET_KEY) as found:
        yield found
