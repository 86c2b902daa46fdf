"""The runtime's connection pool: asyncpg directly, JSONB as Python values.

The schema and migrations are SQLAlchemy's (``tables.py``, Alembic); the hot paths — claims,
outcomes, readiness — are explicit SQL on asyncpg, because a step is meant to cost a
transaction and a Python ORM layer per statement would cost more than the statement.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg

T = TypeVar("T")


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


async def create_pool(url: str, *, min_size: int = 1, max_size: int = 10) -> asyncpg.Pool:
    pool = await asyncpg.create_pool(
        asyncpg_dsn(url), min_size=min_size, max_size=max_size, init=_init, reset=_keep
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
