"""Fixtures for engine tests: ``h`` is a Harness on a fresh database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.integration.engine.harness import Harness, harness


@pytest.fixture
async def h(db_url: str, tmp_path: Path) -> AsyncIterator[Harness]:
    async with harness(db_url, tmp_path / "artifacts") as found:
        yield found
