"""Pinned pipeline versions, parsed once per process.

A version row is immutable, so a parsed copy can be kept for as long as the process lives
without ever going stale: this is a cache of facts, not scheduler state.
"""

from __future__ import annotations

import asyncpg

from dirigent.engine.shapes.manifests.pipeline import Pipeline
from dirigent.engine.store.transactions.definitions import get_version_document


class VersionCache:
    """version_id → parsed Pipeline; bounded, oldest dropped first."""

    def __init__(self, limit: int = 512) -> None:
        self._limit = limit
        self._items: dict[int, Pipeline] = {}

    def peek(self, version_id: int) -> Pipeline | None:
        """The parsed version when already held; no database needed."""
        return self._items.get(version_id)

    async def get(self, conn: asyncpg.Connection, version_id: int) -> Pipeline:
        found = self._items.get(version_id)
        if found is not None:
            return found
        pipeline = Pipeline.model_validate(await get_version_document(conn, version_id))
        if len(self._items) >= self._limit:
            self._items.pop(next(iter(self._items)))
        self._items[version_id] = pipeline
        return pipeline
