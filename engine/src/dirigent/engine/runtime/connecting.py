"""Opening the connections a step names, for that step only.

A block declares which config fields name a connection, and of which kinds
(``BlockSpec.connection_fields``; ``connection`` of any kind unless it says otherwise). Only
the connections named in those fields are read and unsealed, and only on the path that calls
the block for one attempt (execute, probe, fetch on the worker; cancel wherever the remote is
told): a block never reaches a connection its step did not name, and a value the step
did not name in a declared field is never taken for a connection's name.

A connection of a kind the field does not take is refused before its secrets are unsealed
(apply already refuses it; this covers a Connection changed after the pipeline was applied).

``connection_reader`` is the same read for the artifact store: the installation's own
Connection that opens the artifact root (``DIRIGENT_ARTIFACT_CONNECTION``), never a step's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from dirigent.engine.infrastructure.artifacts import ConnectionReader
from dirigent.engine.infrastructure.crypto import SecretSealer
from dirigent.engine.store.transactions.connections import open_connection
from dirigent.sdk import BlockSpec

__all__ = ["Opened", "Unopenable", "connection_reader", "open_declared"]

ConnFactory = Callable[[], AbstractAsyncContextManager[Any]]


class Opened(dict[str, dict[str, Any]]):
    """Connection name -> its settings with secrets opened; ``secrets`` holds the opened
    secret values themselves, which the engine redacts from everything the attempt reports."""

    secrets: frozenset[str] = frozenset()


class Unopenable(ValueError):
    """A named connection that cannot be opened: its message names it and says why."""


async def open_declared(
    conn_factory: ConnFactory,
    spec: BlockSpec,
    config: Any,
    namespace: str,
    sealer: SecretSealer | None,
) -> Opened:
    """Connection name -> its settings with secrets opened, for each declared field set.

    A name that matches no connection is left out (the block's ``ctx.connection`` says so
    when it asks); one of the wrong kind, or whose secrets cannot be opened, raises.
    """
    opened = Opened()
    secrets: set[str] = set()
    async for name, values in _each(conn_factory, spec, config, namespace, sealer, secrets):
        opened[name] = values
    opened.secrets = frozenset(secrets)
    return opened


async def _each(
    conn_factory: ConnFactory,
    spec: BlockSpec,
    config: Any,
    namespace: str,
    sealer: SecretSealer | None,
    secrets: set[str],
) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    if not isinstance(config, dict):
        return
    for declared in spec.connection_fields:
        name = config.get(declared.field)
        if not isinstance(name, str):
            continue
        try:
            async with conn_factory() as conn:
                values = await open_connection(
                    conn, namespace, name, sealer, declared.kinds, secrets_out=secrets
                )
        except ValueError as err:  # SealError is a ValueError
            raise Unopenable(f"connection '{name}' cannot be opened: {err}") from err
        if values is not None:
            yield name, values


def connection_reader(conn_factory: ConnFactory, sealer: SecretSealer | None) -> ConnectionReader:
    """Reads one Connection with its secrets opened, for the artifact store."""

    async def read(namespace: str, name: str, kinds: tuple[str, ...]) -> dict[str, Any] | None:
        async with conn_factory() as conn:
            return await open_connection(conn, namespace, name, sealer, kinds)

    return read
