"""One embedded PostgreSQL per test session, a fresh migrated database per test.

The server starts once per pytest process; the schema is migrated once (``Engine.migrate``,
the door's verb) into a template database; each test that asks for ``db_url`` gets its own
database cloned from that template with CREATE DATABASE ... TEMPLATE, which takes
milliseconds and keeps tests independent.

The fixtures here are sync so they never share an event loop with a test: ``run_blocking``
runs what must be awaited on a private loop. tests/conftest.py and the e2e tests that need a
database import them by name.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import pytest

from dirigent.engine import EmbeddedPostgres, Engine

T = TypeVar("T")

TEMPLATE_DATABASE = "dirigent_template"
# Fixtures that need the server: a test asking for one is marked `integration`.
PG_FIXTURES = frozenset({"pg_server", "pg_template", "db_url", "make_database"})


def run_blocking(factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to completion on a private loop in another thread.

    Safe from sync fixtures and sync tests even while pytest-asyncio owns a loop in the main
    thread: asyncio.run there would replace (and then unset) the main thread's loop.
    """
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(factory())).result()


def plain_dsn(url: str) -> str:
    """The libpq DSN asyncpg takes, from the SQLAlchemy URL the engine's settings take."""
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


async def _json_codecs(conn: asyncpg.Connection) -> None:
    for name in ("json", "jsonb"):
        await conn.set_type_codec(
            name, encoder=json.dumps, decoder=json.loads, schema="pg_catalog", format="text"
        )


async def rows_pool(url: str, *, max_size: int = 10) -> asyncpg.Pool:
    """A pool for a test's own SQL (assertions over rows, a lock held on purpose): JSON
    columns come back as Python values, as the engine's own reads see them."""
    pool = await asyncpg.create_pool(
        plain_dsn(url), min_size=1, max_size=max_size, init=_json_codecs
    )
    assert pool is not None
    return pool


async def on_server(server: EmbeddedPostgres, statement: str) -> None:
    """Run one statement on the server's `postgres` database, outside a transaction (CREATE
    and DROP DATABASE cannot run in one)."""
    conn = await asyncpg.connect(server.dsn)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def create_database(server: EmbeddedPostgres, name: str, *, template: str = "") -> str:
    """An empty database (or a clone of ``template``) on ``server``; returns its URL."""
    statement = f'CREATE DATABASE "{name}"'
    if template:
        # file_copy cloned a small template about twice as fast as wal_log with fsync off.
        statement += f' TEMPLATE "{template}" STRATEGY FILE_COPY'
    await on_server(server, statement)
    return server.url_for(name)


async def migrated_database(server: EmbeddedPostgres, name: str) -> str:
    """A database at this release's schema, migrated through the door (``Engine.migrate``)."""
    url = await create_database(server, name)
    await Engine.migrate(url)
    return url


async def schema_revision(url: str) -> str | None:
    """The schema revision a migration left in the database (None: never migrated)."""
    conn = await asyncpg.connect(plain_dsn(url))
    try:
        if await conn.fetchval("SELECT to_regclass('alembic_version')") is None:
            return None
        found = await conn.fetchval("SELECT version_num FROM alembic_version")
        return None if found is None else str(found)
    finally:
        await conn.close()


class DatabaseFactory:
    """Creates databases cloned from the migrated template; drops them when told."""

    def __init__(self, server: EmbeddedPostgres, template: str) -> None:
        self.server = server
        self.template = template
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()

    def create(self) -> str:
        """A fresh, migrated database; returns its asyncpg SQLAlchemy URL."""
        with self._lock:
            name = f"test_{os.getpid()}_{next(self._numbers)}"
        return run_blocking(lambda: create_database(self.server, name, template=self.template))

    def drop(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        statement = f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'
        run_blocking(lambda: on_server(self.server, statement))


@pytest.fixture(scope="session")
def pg_server() -> Iterator[EmbeddedPostgres]:
    """The session's embedded PostgreSQL server (superuser `postgres`, trust auth).

    Its data lives in a directory of its own rather than under pytest's temporary tree:
    as root the server runs as another user, and pytest re-creates and prunes its tree
    (mode 0700) when several pytest processes share the machine.
    """
    base = Path(tempfile.mkdtemp(prefix="dirigent-test-pg-"))
    try:
        with EmbeddedPostgres(base / "data") as server:
            yield server
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_template(pg_server: EmbeddedPostgres) -> str:
    """Name of the template database, migrated to head once per session."""
    # The migration closes its connections: a template with open connections cannot be cloned.
    run_blocking(lambda: migrated_database(pg_server, TEMPLATE_DATABASE))
    return TEMPLATE_DATABASE


@pytest.fixture(scope="session")
def database_factory(pg_server: EmbeddedPostgres, pg_template: str) -> DatabaseFactory:
    return DatabaseFactory(pg_server, pg_template)


@pytest.fixture
def make_database(database_factory: DatabaseFactory) -> Iterator[Callable[[], str]]:
    """A callable returning the URL of another fresh migrated database (dropped after)."""
    created: list[str] = []

    def make() -> str:
        url = database_factory.create()
        created.append(url)
        return url

    yield make
    for url in created:
        database_factory.drop(url)


@pytest.fixture
def db_url(make_database: Callable[[], str]) -> str:
    """URL (postgresql+asyncpg://...) of a fresh database migrated to head, for this test only.

    Sync, so subprocess tests can pass it on (e.g. as DIRIGENT_DATABASE_URL).
    """
    return make_database()
