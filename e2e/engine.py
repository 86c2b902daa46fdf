"""The e2e suite's view into the engine: runs started and read through ``Engine``, the door.

Why: runs are rows in PostgreSQL, not Kubernetes objects, so a test that starts a run or
reads its outcome goes through the same door as every other process. Each call opens an
Engine on the system's database and closes it; the tests are synchronous.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from dirigent.engine import Engine, EngineSettings, RunRequest

T = TypeVar("T")


@dataclass(frozen=True)
class EngineClient:
    database_url: str
    secret_key: str

    def call(self, fn: Callable[[Engine], Awaitable[T]]) -> T:
        async def go() -> T:
            settings = EngineSettings(
                database_url=self.database_url, secret_key=self.secret_key, metrics_port=None
            )
            async with Engine.open(settings, pool_size=2) as engine:
                return await fn(engine)

        return asyncio.run(go())

    def start_run(self, namespace: str, pipeline: str, params: dict[str, Any] | None = None) -> int:
        request = RunRequest(namespace=namespace, pipeline=pipeline, params=params or {})
        created = self.call(lambda e: e.runs.start(request))
        return int(created.run_id)

    def run(self, namespace: str, run_id: int) -> Any:
        return self.call(lambda e: e.runs.get(namespace, run_id))

    def pipeline(self, namespace: str, name: str) -> Any:
        return self.call(lambda e: e.pipelines.get(namespace, name))

    def attempts(self, namespace: str, run_id: int, step: str) -> list[Any]:
        page = self.call(lambda e: e.runs.attempts(namespace, run_id, step))
        return list(page.items)
