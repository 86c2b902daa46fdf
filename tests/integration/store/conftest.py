"""Fixtures for the store's own tests: they test modules below the door, so they may reach them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from dirigent.engine.store.schema.database import create_engine


@pytest.fixture
async def engine(db_url: str) -> AsyncIterator[AsyncEngine]:
    """A SQLAlchemy AsyncEngine on this test's fresh database, disposed after the test."""
    eng = create_engine(db_url, pool_size=5, max_overflow=5)
    try:
        yield eng
    finally:
        await eng.dispose()
