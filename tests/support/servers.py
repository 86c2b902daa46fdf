"""Loopback servers a test points the engine or a client at, and the ports they listen on.

``Server`` is an HTTP server whose routes a test sets and which records every request (the
other end of an http block, a webhook notifier, a connection check); ``serve`` runs an ASGI
app (a Starlette receiver, the webhook intake) under a real uvicorn. Both listen on
127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from aiohttp import web

from tests.support.waiting import eventually

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


@contextlib.asynccontextmanager
async def recording_server() -> AsyncIterator[Server]:
    """A ``Server`` listening on a loopback port for the duration."""
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


@contextlib.asynccontextmanager
async def serve(app: Any) -> AsyncIterator[str]:
    """Serve an ASGI app on a loopback port for the duration; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    task = asyncio.create_task(server.serve())
    await eventually(lambda: server.started, timeout=10, every=0.01, what="the loopback server")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
