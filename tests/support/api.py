"""The REST API under test: the app served by a real uvicorn in front of an engine harness.

Every request crosses a real TCP socket on loopback to a real uvicorn serving
``create_app``; nothing is called in-process through the ASGI transport.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from dirigent.api.app import create_app
from dirigent.api.auth import Auth, StaticToken, StreamBudget
from dirigent.api.client import Client
from dirigent.api.metrics import ApiMetrics
from dirigent.api.server import ApiServer
from dirigent.api.streams import StreamSettings
from tests.support.harness import Harness, harness

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
    """``root``: the artifact root, a folder or a URI (``artifact_connection`` names the
    Connection that reaches it)."""
    async with harness(
        url, root, secret_key=SECRET_KEY, artifact_connection=artifact_connection
    ) as h:
        metrics = ApiMetrics()
        app = create_app(
            h.engine,
            auth=auth or StaticToken(TOKEN),
            metrics=metrics,
            streams=streams,
            stream_settings=stream_settings or StreamSettings(poll=0.1, lifetime=60),
        )
        server = ApiServer(app)
        try:
            await server.start()
            async with Client(server.url, TOKEN) as client:
                yield Api(server, client, h, metrics)
        finally:
            await server.stop()
