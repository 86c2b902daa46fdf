"""The workers facet: build a worker on this engine, and list the workers that heartbeat."""

from __future__ import annotations

import dataclasses
from typing import Any

from dirigent.engine.door.paging import checked_limit, page_of
from dirigent.engine.door.parts import Parts
from dirigent.engine.runtime.process import worker_config
from dirigent.engine.runtime.worker import Worker
from dirigent.engine.shapes.views import Page, WorkerView, decode_key
from dirigent.engine.store.pool import asyncpg_dsn
from dirigent.engine.store.queries import api_reads


class Workers:
    def __init__(self, parts: Parts) -> None:
        self._p = parts

    def build(self, **overrides: Any) -> Worker:
        """A worker on this engine's pool and catalog; ``overrides`` adjust its config."""
        config = dataclasses.replace(worker_config(self._p.settings), **overrides)
        return Worker(
            self._p.db.pool,
            asyncpg_dsn(self._p.db.direct_url),
            self._p.catalog,
            self._p.storage,
            config,
        )

    async def page(self, *, cursor: str | None = None, limit: int = 100) -> Page[WorkerView]:
        after = decode_key(cursor, str)
        rows = await self._p.read(
            lambda c: api_reads.workers(c, after=after, limit=checked_limit(limit))
        )
        return page_of(rows, limit, lambda r: (r.id,))
