"""Connections: settings in the clear, secret fields sealed with AES-GCM.

Secret values arrive from whoever can read them (the operator reads Kubernetes Secrets) and
are sealed before they reach a row; only a worker opening a connection for a step unseals
them, so nothing else ever needs the key or Secret access. The stored digest covers the
manifest and the secret values' hashes, so a changed Secret re-syncs like a changed spec.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping
from typing import Any

import asyncpg

from dirigent.engine.infrastructure.crypto import SecretSealer
from dirigent.engine.shapes.manifests.connection import Connection
from dirigent.engine.shapes.manifests.export import digest as manifest_digest
from dirigent.engine.store.pool import affected
from dirigent.engine.store.transactions.definitions import ApplyAction


def connection_digest(manifest: Connection, secret_values: Mapping[str, str]) -> str:
    h = hashlib.sha256(manifest_digest(manifest).encode())
    for name in sorted(secret_values):
        h.update(f"\0{name}\0".encode() + hashlib.sha256(secret_values[name].encode()).digest())
    return h.hexdigest()


async def apply_connection(
    conn: asyncpg.Connection,
    manifest: Connection,
    *,
    namespace: str,
    secret_values: Mapping[str, str],
    sealer: SecretSealer | None,
    owner_uid: str | None = None,
) -> ApplyAction:
    name = manifest.metadata.name
    the_digest = connection_digest(manifest, secret_values)
    current = await conn.fetchval(
        "SELECT digest FROM connections WHERE namespace = $1 AND name = $2 FOR UPDATE",
        namespace,
        name,
    )
    if current == the_digest:
        return ApplyAction.UNCHANGED
    if secret_values and sealer is None:
        raise ValueError("DIRIGENT_SECRET_KEY is not set; it is needed to seal connection secrets")
    sealed = (
        sealer.seal_fields(secret_values, namespace=namespace, connection=name) if sealer else {}
    )
    await conn.execute(
        """INSERT INTO connections (namespace, name, type, settings, secrets, digest, owner_uid)
           VALUES ($1, $2, $3, $4, $5, $6, $7)
           ON CONFLICT (namespace, name) DO UPDATE SET type = $3, settings = $4, secrets = $5, digest = $6,
               owner_uid = COALESCE($7, connections.owner_uid), updated_at = now()""",
        namespace,
        name,
        manifest.spec.type,
        manifest.spec.settings,
        sealed,
        the_digest,
        owner_uid,
    )
    return ApplyAction.CREATED if current is None else ApplyAction.UPDATED


async def connection_kinds(conn: asyncpg.Connection, namespace: str) -> dict[str, str]:
    """The namespace's connections: name -> kind (what apply checks a step's fields against)."""
    rows = await conn.fetch("SELECT name, type FROM connections WHERE namespace = $1", namespace)
    return {r["name"]: r["type"] for r in rows}


async def open_connection(
    conn: asyncpg.Connection,
    namespace: str,
    name: str,
    sealer: SecretSealer | None,
    kinds: Collection[str] = (),
    *,
    secrets_out: set[str] | None = None,
) -> dict[str, Any] | None:
    """Settings merged with the opened secret fields; None when there is no such connection.

    ``kinds``, when given, are the kinds the caller accepts: a connection of another kind is
    refused (ValueError) before any secret is unsealed.
    """
    row = await conn.fetchrow(
        "SELECT type, settings, secrets FROM connections WHERE namespace = $1 AND name = $2",
        namespace,
        name,
    )
    if row is None:
        return None
    if kinds and row["type"] not in kinds:
        raise ValueError(f"it is of kind '{row['type']}', not {' or '.join(sorted(kinds))}")
    values: dict[str, Any] = dict(row["settings"])
    secrets: dict[str, str] = row["secrets"]
    if secrets and sealer is None:
        raise ValueError("DIRIGENT_SECRET_KEY is not set; it is needed to open connection secrets")
    for field, sealed in secrets.items():
        assert sealer is not None
        values[field] = sealer.open(sealed, namespace=namespace, connection=name, field=field)
        if secrets_out is not None and isinstance(values[field], str):
            secrets_out.add(values[field])
    return values


async def delete_connection(conn: asyncpg.Connection, namespace: str, name: str) -> bool:
    status: str = await conn.execute(
        "DELETE FROM connections WHERE namespace = $1 AND name = $2", namespace, name
    )
    return affected(status) == 1
