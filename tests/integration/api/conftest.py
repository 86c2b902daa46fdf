"""Fixtures for API tests: the engine on a fresh database, the app under a real uvicorn."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.api import Api, served


@pytest.fixture
async def api(db_url: str, tmp_path: Path) -> AsyncIterator[Api]:
    async with served(db_url, tmp_path / "artifacts") as found:
        yield found
