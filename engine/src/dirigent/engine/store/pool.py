"""The runtime's connection pool: asyncpg directly, JSONB as Python values.

The schema and migrations are SQLAlchemy's (``tables.py``, Alembic); the hot paths — claims,
outcomes, readiness — are explicit SQL on asyncpg, because a step is meant to cost a
transaction and a Python ORM layer per statement would cost more than the statement.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias, TypeVar

import asyncpg

from dirigent.engine.shapes.problems import EngineUnavailable

T = TypeVar("T")
# What store functions take; callers above the store name the type, never use it.
Connection: TypeAlias = asyncpg.Connection
Pool: TypeAlias = asyncpg.Pool
# Errors PostgreSQL (or the driver) raises for a value it cannot store: deterministic, so the
# batch holding one is split rather than retried.
UNSTORABLE_ERRORS: tuple[type[Exception], ...] = (asyncpg.DataError, UnicodeError)
# The database, or the network to it, failed: a loop that talks to it logs and goes on.
DATABASE_ERRORS: tuple[type[Exception], ...] = (
    OSError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
)
# The database is gone or refusing connections (down, restarting, shutting down): the
# request may succeed later, so the door answers "unavailable", not "failed".
UNAVAILABLE_ERRORS: tuple[type[Exception], ...] = (
    OSError,
    TimeoutError,
    asyncpg.InterfaceError,
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
)


def affected(status: str) -> int:
    """The row count of a command's status tag (``UPDATE 3`` gives 3, ``INSERT 0 1`` gives 1)."""
    return int(status.rsplit(" ", 1)[-1])


def asyncpg_dsn(url: str) -> str:
    """A SQLAlchemy URL (postgresql+asyncpg://...) as a plain libpq DSN."""
    for prefix in ("postgresql+asyncpg://", "postgresql+psycopg://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql://" + url[len(prefix) :]
    return url


async def _init(conn: asyncpg.Connection) -> None:
    for name in ("json", "jsonb"):
        await conn.set_type_codec(
            name, encoder=json.dumps, decoder=json.loads, schema="pg_catalog", format="text"
        )


async def connect(url: str, **kwargs: Any) -> asyncpg.Connection:
    conn: asyncpg.Connection = await asyncpg.connect(asyncpg_dsn(url), **kwargs)
    await _init(conn)
    return conn


async def _keep(conn: asyncpg.Connection) -> None:
    """Pool connections are released without asyncpg's reset round trip.

    The runtime never changes session state on a pooled connection (no SET, LISTEN or
    session advisory lock: those live on dedicated connections), so there is nothing to
    reset, and the claim/outcome hot path saves one round trip per acquire.
    """


async def create_pool(
    url: str, *, min_size: int = 1, max_size: int = 10, behind_pooler: bool = False
) -> asyncpg.Pool:
    """``behind_pooler``: the URL is PgBouncer in transaction mode, where a named prepared
    statement made on one server connection is unknown on the next: none are cached."""
    extra: dict[str, Any] = {"statement_cache_size": 0} if behind_pooler else {}
    pool = await asyncpg.create_pool(
        asyncpg_dsn(url), min_size=min_size, max_size=max_size, init=_init, reset=_keep, **extra
    )
    assert pool is not None
    return pool


async def in_transaction(
    pool: asyncpg.Pool, fn: Callable[[asyncpg.Connection], Awaitable[T]], *, tries: int = 5
) -> T:
    """Run ``fn`` in a transaction, retrying when PostgreSQL aborts it for a deadlock."""
    for attempt in range(tries):
        try:
            async with pool.acquire() as conn, conn.transaction():
                return await fn(conn)
        except (asyncpg.DeadlockDetectedError, asyncpg.SerializationError):
            if attempt == tries - 1:
                raise
            await asyncio.sleep(0.01 * (attempt + 1))
    raise AssertionError("unreachable")


class Database:
    """One process's connection budget: a pool for transactions and reads, one listener.

    The pool serves short transactions; LISTEN needs a connection of its own that is never
    returned to a pool (and, behind PgBouncer in transaction mode, a direct one).
    """

    def __init__(self, url: str, pool: asyncpg.Pool, direct_url: str | None = None) -> None:
        self.url = url
        self.pool = pool
        # Session-bound connections (LISTEN, advisory locks) go here: the server itself.
        self.direct_url = direct_url or url
        self._listener: asyncpg.Connection | None = None

    @classmethod
    async def connect(cls, url: str, *, max_size: int, direct_url: str | None = None) -> Database:
        """``direct_url`` set means ``url`` is a transaction-mode pooler (PgBouncer)."""
        try:
            pool = await create_pool(url, max_size=max_size, behind_pooler=direct_url is not None)
        except (OSError, asyncpg.PostgresError) as err:
            raise EngineUnavailable(f"cannot connect to the database: {err}") from None
        return cls(url, pool, direct_url)

    async def transaction(self, fn: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        return await in_transaction(self.pool, fn)

    async def read(self, fn: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        async with self.pool.acquire() as conn:
            return await fn(conn)

    async def listen(self, channel: str, callback: Callable[[], None]) -> None:
        """Call ``callback`` on every NOTIFY on ``channel`` (one shared listener connection)."""
        if self._listener is None:
            self._listener = await asyncpg.connect(asyncpg_dsn(self.direct_url))
        await self._listener.add_listener(channel, lambda *_: callback())

    async def close(self) -> None:
        if self._listener is not None:
            await self._listener.close()
        await self.pool.close()


async def listen(dsn: str, channel: str, callback: Callable[[], None]) -> Connection:
    """A dedicated connection calling ``callback`` on every NOTIFY on ``channel``; close it when done."""
    conn: Connection = await asyncpg.connect(dsn)
    await conn.add_listener(channel, lambda *_: callback())
    return conn
