"""Fixtures for trigger and alerting tests: an engine with a secret key, loopback servers."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from dirigent.engine import Engine, EngineSettings
from dirigent.engine.infrastructure.plugins import discover
from dirigent.engine.store.pool import Database
from tests.integration.engine.conftest import processes
from tests.integration.engine.harness import Harness
from tests.waiting import until

__all__ = ["processes"]

SECRET_KEY = base64.b64encode(bytes(range(32))).decode()


def settings_for(url: str, root: Path, **kw: Any) -> EngineSettings:
    return EngineSettings(
        database_url=url,
        artifact_root=root,
        metrics_port=None,
        secret_key=SECRET_KEY,  # type: ignore[arg-type]
        **kw,
    )


@contextlib.asynccontextmanager
async def keyed_harness(url: str, root: Path, **kw: Any) -> AsyncIterator[Harness]:
    database = await Database.connect(url, max_size=20)
    try:
        engine = Engine(settings_for(url, root, **kw), database, discover())
        yield Harness(engine, database.pool, url)
    finally:
        await database.close()


@pytest.fixture
async def h(db_url: str, tmp_path: Path) -> AsyncIterator[Harness]:
    async with keyed_harness(db_url, tmp_path / "artifacts") as found:
        yield found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def serve(app: Any) -> AsyncIterator[str]:
    """Serve an ASGI app on a loopback port for the duration; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    task = asyncio.create_task(server.serve())
    await until(lambda: server.started, timeout=10, every=0.01, what="the loopback server")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
