"""Shared test fixtures: one embedded PostgreSQL per session, a fresh database per test.

The server starts once per pytest process; the schema is migrated once into a template
database; each test that asks for `db_url` (or `engine`) gets its own database cloned from
that template with CREATE DATABASE ... TEMPLATE, which takes milliseconds and keeps tests
independent. `make unit` runs two pytest-xdist workers: each is such a process, with its own
server, data dir (mkdtemp), port (picked free, retried if taken) and template. Fixtures
that need PostgreSQL mark their tests `integration` automatically.

Fixtures are sync where they can be (server, template, database creation) so they never
share an event loop with the test; only `engine` is async, because an AsyncEngine belongs to
the loop of the test that uses it.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from dirigent.engine.store.database import (
    create_database,
    create_engine,
    drop_database,
    upgrade_async,
)
from dirigent.engine.store.embedded import EmbeddedPostgres

T = TypeVar("T")

TEMPLATE_DATABASE = "dirigent_template"
_PG_FIXTURES = frozenset({"pg_server", "pg_template", "db_url", "engine", "make_database"})


def run_blocking(factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to completion on a private loop in another thread.

    Safe from sync fixtures and sync tests even while pytest-asyncio owns a loop in the main
    thread: asyncio.run there would replace (and then unset) the main thread's loop.
    """
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(factory())).result()


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
        run_blocking(
            lambda: create_database(
                self.server.url, name, template=self.template, strategy="file_copy"
            )
        )
        return self.server.url_for(name)

    def drop(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        run_blocking(lambda: drop_database(self.server.url, name))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _PG_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)


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
    run_blocking(lambda: create_database(pg_server.url, TEMPLATE_DATABASE))
    # upgrade() closes its connections: a template with open connections cannot be cloned.
    run_blocking(lambda: upgrade_async(pg_server.url_for(TEMPLATE_DATABASE)))
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


@pytest.fixture
async def engine(db_url: str) -> AsyncIterator[AsyncEngine]:
    """An AsyncEngine on this test's fresh database, disposed after the test."""
    eng = create_engine(db_url, pool_size=5, max_overflow=5)
    try:
        yield eng
    finally:
        await eng.dispose()
