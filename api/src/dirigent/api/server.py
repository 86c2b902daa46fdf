"""Serving the app with uvicorn inside an event loop we own (the CLI, tests, benches).

``ApiServer`` starts uvicorn as a task, reports the port it actually bound (port 0 picks a
free one) once it accepts connections, and stops it gracefully. Signals are not uvicorn's
business here: the process (``dirigent.cli.process``) owns SIGTERM and SIGINT and calls
``stop``; a test's loop keeps its own handlers.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import uvicorn
from fastapi import FastAPI


class _Server(uvicorn.Server):
    def capture_signals(self) -> contextlib.AbstractContextManager[None]:  # type: ignore[override]
        return contextlib.nullcontext()


class ApiServer:
    def __init__(self, app: FastAPI, *, host: str = "127.0.0.1", port: int = 0) -> None:
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_config=None,
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=5,
        )
        self.app = app
        self.server = _Server(config)
        self.host = host
        self._task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        sockets = self.server.servers[0].sockets
        return int(sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        self._task = asyncio.create_task(self.server.serve())
        async with asyncio.timeout(30):
            while not self.server.started:
                if self._task.done():
                    await self._task
                    raise RuntimeError("the API server stopped before it started")
                await asyncio.sleep(0.01)

    async def stop(self) -> None:
        self.server.should_exit = True
        if self._task is not None:
            await self._task

    async def wait(self) -> None:
        """Until the server exits (on SIGTERM or SIGINT when it owns signals)."""
        if self._task is not None:
            await self._task


@contextlib.asynccontextmanager
async def serving(
    app: FastAPI, *, host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[ApiServer]:
    server = ApiServer(app, host=host, port=port)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
