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

import pytest

from tests.support.postgres import (
    PG_FIXTURES,
    database_factory,
    db_url,
    make_database,
    pg_server,
    pg_template,
)

__all__ = ["database_factory", "db_url", "make_database", "pg_server", "pg_template"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if PG_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)
