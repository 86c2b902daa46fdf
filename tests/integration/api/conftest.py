"""Fixtures for API tests: the engine on a fresh database, the app under a real uvicorn.

Every request in these tests crosses a real TCP socket on loopback to a real uvicorn serving
``create_app``; nothing is called in-process through the ASGI transport.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dirigent.api.app import create_app
from dirigent.api.auth import Auth, StaticToken, StreamBudget
from dirigent.api.client import Client
from dirigent.api.metrics import ApiMetrics
from dirigent.api.server import ApiServer
from dirigent.api.streams import StreamSettings
from dirigent.engine import Engine, EngineSettings
from dirigent.engine.infrastructure.plugins import discover
from dirigent.engine.store.pool import Database
from tests.integration.engine.harness import Harness

TOKEN = "test-token-" + "x" * 16
SECRET_KEY = "0" * 64


@dataclass
class Api:
    """A served API: its URL, a client holding the token, the engine harness behind it."""

    server: ApiServer
    client: Client
    h: Harness
    metrics: ApiMetrics

    @property
    def url(self) -> str:
        return self.server.url


@contextlib.asynccontextmanager
async def served(
    url: str,
    root: Path | str,
    *,
    streams: StreamBudget | None = None,
    stream_settings: StreamSettings | None = None,
    auth: Auth | None = None,
    artifact_connection: str | None = None,
) -> AsyncIterator[Api]:
    settings = EngineSettings(
        database_url=url,
        artifact_root=root,  # type: ignore[arg-type]  # a folder or a URI
        artifact_connection=artifact_connection,
        metrics_port=None,
        secret_key=SECRET_KEY,  # type: ignore[arg-type]
        enabled_unsafe_blocks=["testing.unsafe"],
    )
    database = await Database.connect(url, max_size=20)
    engine = Engine(settings, database, discover())
    metrics = ApiMetrics()
    app = create_app(
        engine,
        auth=auth or StaticToken(TOKEN),
        metrics=metrics,
        streams=streams,
        stream_settings=stream_settings or StreamSettings(poll=0.1, lifetime=60),
    )
    server = ApiServer(app)
    try:
        await server.start()
        async with Client(server.url, TOKEN) as client:
            yield Api(server, client, Harness(engine, database.pool, url), metrics)
    finally:
        await server.stop()
        await engine.storage.aclose()
        await database.close()


@pytest.fixture
async def api(db_url: str, tmp_path: Path) -> AsyncIterator[Api]:
    async with served(db_url, tmp_path / "artifacts") as found:
        yield found
