"""Fixtures for engine tests: ``h`` is a Harness on a fresh database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.harness import Harness, attempt_drift, counter_drift, harness, processes

__all__ = ["h", "processes"]


@pytest.fixture
async def h(db_url: str, tmp_path: Path) -> AsyncIterator[Harness]:
    async with harness(db_url, tmp_path / "artifacts") as found:
        yield found
        # After every scenario: a fan-out step's counters are exactly its items' statuses,
        # and every step's attempt counter is exactly its attempts.
        assert await counter_drift(found) == []
        assert await attempt_drift(found) == []
