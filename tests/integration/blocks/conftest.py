"""Fixtures for block tests: an engine harness (``h``) and a real HTTP server on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.integration.engine.harness import Harness, harness

__all__ = ["Server", "h", "server"]
UNSAFE = ("shell.run", "docker.run")


@pytest.fixture
async def h(db_url: str, tmp_path: Path) -> AsyncIterator[Harness]:
    """An engine on a fresh database whose instance enables the code-running blocks."""
    async with harness(db_url, tmp_path / "artifacts", unsafe=UNSAFE) as found:
        yield found


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Server:
    """A loopback HTTP server whose routes a test sets; it records every request."""

    url: str = ""
    routes: dict[str, Handler] = field(default_factory=dict)
    seen: list[dict[str, Any]] = field(default_factory=list)

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.seen.append(
            {
                "method": request.method,
                "path": request.path,
                "query": dict(request.query),
                "headers": dict(request.headers),
                "body": body,
            }
        )
        handler = self.routes.get(request.path)
        if handler is None:
            return web.Response(status=404, text="no such route")
        return await handler(request)


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    srv = Server()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", srv.dispatch)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    srv.url = f"http://127.0.0.1:{port}"
    try:
        yield srv
    finally:
        await runner.cleanup()
