"""Connecting to PostgreSQL and migrating it: the two things every process does first.

`create_engine` is the one place pool and session settings are decided, so the API, workers,
the operator and tests all talk to the database the same way. `upgrade` runs the Alembic
scripts shipped inside this package (no alembic.ini needed, so it works from an installed
wheel) and is what `dirigent migrate`, `dirigent dev` and the test template use.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from dirigent.engine.shapes.problems import EngineUnavailable

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = [
    "MIGRATION_ERRORS",
    "MigrationResult",
    "alembic_config",
    "create_database",
    "create_engine",
    "current_revision",
    "drop_database",
    "head_revision",
    "normalize_url",
    "upgrade",
    "upgrade_async",
]

MIGRATIONS: Final = "dirigent.engine.store.schema:migrations"
# Serialises concurrent `dirigent migrate` runs (a Helm hook racing `dirigent dev`, two test
# sessions): the second waits, then finds nothing to do. Arbitrary but fixed.
_MIGRATION_LOCK_ID: Final = 0x646972_6D6967  # "dir" "mig"
_DATABASE_NAME: Final = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# What a migration raises when the database cannot be reached or refuses a statement; a
# caller above the store catches these without importing the driver.
MIGRATION_ERRORS: Final[tuple[type[Exception], ...]] = (OSError, SQLAlchemyError)


def normalize_url(url: str) -> str:
    """Accept `postgres://` / `postgresql://` / `postgresql+asyncpg://`; return the asyncpg form."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql":
        raise ValueError(f"dirigent needs a PostgreSQL URL, got {parsed.drivername!r}")
    return parsed.set(drivername="postgresql+asyncpg").render_as_string(hide_password=False)


def create_engine(
    url: str,
    *,
    pool_size: int = 10,
    max_overflow: int = 10,
    pool_timeout: float = 30.0,
    pool_recycle: float = 1800.0,
    pool_pre_ping: bool = False,
    application_name: str = "dirigent",
    echo: bool = False,
) -> AsyncEngine:
    """An asyncpg `AsyncEngine` with dirigent's session settings.

    Pre-ping is off by default: it costs a round trip per checkout on the claim path, and the
    runtime loops already retry a transaction that fails on a dropped connection. Sessions run
    in UTC so `now()` and timestamps read back are unambiguous.
    """
    return create_async_engine(
        normalize_url(url),
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_timeout=pool_timeout,
        pool_recycle=pool_recycle,
        pool_pre_ping=pool_pre_ping,
        echo=echo,
        connect_args={"server_settings": {"application_name": application_name, "timezone": "UTC"}},
    )


def alembic_config(url: str | None = None) -> Config:
    """An Alembic `Config` for the shipped migrations (no ini file)."""
    config = Config()
    config.set_main_option("script_location", MIGRATIONS)
    if url is not None:
        # ConfigParser interpolation: a literal % in a password must be doubled.
        config.set_main_option("sqlalchemy.url", normalize_url(url).replace("%", "%%"))
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the migrations package has no revisions"
    return head


@dataclass(frozen=True)
class MigrationResult:
    before: str | None
    after: str | None

    @property
    def changed(self) -> bool:
        return self.before != self.after


def _current(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def current_revision(url: str) -> str | None:
    engine = create_engine(url, pool_size=1, max_overflow=0, application_name="dirigent-migrate")
    try:
        async with engine.connect() as connection:
            return await connection.run_sync(_current)
    finally:
        await engine.dispose()


async def require_head(url: str) -> None:
    """Refuse a database that is unreachable or not at this release's schema, in one line."""
    try:
        found = await current_revision(url)
    except (OSError, SQLAlchemyError) as err:
        reason = str(getattr(err, "orig", None) or err).splitlines()[0]
        raise EngineUnavailable(f"cannot connect to the database: {reason}") from None
    expected = head_revision()
    if found != expected:
        raise EngineUnavailable(
            f"the database schema is at {found or 'nothing (an empty database)'}, this release "
            f"needs {expected}: run `dirigent migrate`"
        )


async def upgrade_async(url: str, revision: str = "head") -> MigrationResult:
    """Migrate the database at `url` to `revision`, in one transaction."""
    engine = create_engine(url, pool_size=1, max_overflow=0, application_name="dirigent-migrate")
    try:
        async with engine.begin() as connection:
            await connection.execute(
                text("SELECT pg_advisory_xact_lock(:id)"), {"id": _MIGRATION_LOCK_ID}
            )

            def run(sync_connection: Connection) -> MigrationResult:
                before = _current(sync_connection)
                config = alembic_config(url)
                # env.py uses this connection (and so our transaction and lock).
                config.attributes["connection"] = sync_connection
                command.upgrade(config, revision)
                return MigrationResult(before=before, after=_current(sync_connection))

            return await connection.run_sync(run)
    finally:
        await engine.dispose()


def upgrade(url: str, revision: str = "head") -> MigrationResult:
    """Blocking `upgrade_async`, for callers without an event loop (CLI, sync fixtures)."""
    return asyncio.run(upgrade_async(url, revision))


def _quoted_database(name: str) -> str:
    if not _DATABASE_NAME.match(name):
        raise ValueError(f"not a plain database name: {name!r}")
    return f'"{name}"'


async def create_database(
    server_url: str,
    name: str,
    *,
    template: str | None = None,
    strategy: Literal["wal_log", "file_copy"] | None = None,
) -> None:
    """CREATE DATABASE `name` (optionally cloned from `template`) on the server of `server_url`.

    Cloning needs the template to have no open connections. `file_copy` cloned a small
    template about twice as fast as the default `wal_log` with fsync off (tests).
    """
    statement = f"CREATE DATABASE {_quoted_database(name)}"
    if template is not None:
        statement += f" TEMPLATE {_quoted_database(template)}"
    if strategy is not None:
        statement += f" STRATEGY {strategy.upper()}"
    await _autocommit(server_url, statement)


async def drop_database(server_url: str, name: str) -> None:
    """DROP DATABASE IF EXISTS `name`, disconnecting whoever is still connected."""
    await _autocommit(server_url, f"DROP DATABASE IF EXISTS {_quoted_database(name)} WITH (FORCE)")


async def _autocommit(server_url: str, statement: str) -> None:
    # CREATE/DROP DATABASE cannot run inside a transaction block.
    engine = create_engine(server_url, pool_size=1, max_overflow=0).execution_options(
        isolation_level="AUTOCOMMIT"
    )
    try:
        async with engine.connect() as connection:
            await connection.execute(text(statement))
    finally:
        await engine.dispose()
