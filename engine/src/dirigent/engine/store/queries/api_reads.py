"""Reads behind the REST API's listings: versions, connections, workers, artifacts, probes.

Each is one statement over indexed columns and returns the engine's view models, built by
column name. Listings are keyset pages like every other read (the caller passes the last key
it saw); connections are read without their sealed secrets — only the secret field *names*
leave this module, so no door can show a secret by accident.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from dirigent.engine.shapes.views import (
    ArtifactView,
    ConnectionView,
    PipelineVersionView,
    WorkerView,
)
from dirigent.engine.store.schema.tables import RUN_TERMINAL_STATUS

TERMINAL_RUN = RUN_TERMINAL_STATUS


async def pipeline_versions(
    conn: asyncpg.Connection, namespace: str, name: str, *, before: int | None, limit: int
) -> list[PipelineVersionView] | None:
    """Versions newest first; None when there is no such pipeline."""
    pid = await conn.fetchval(
        "SELECT id FROM pipelines WHERE namespace = $1 AND name = $2", namespace, name
    )
    if pid is None:
        return None
    rows = await conn.fetch(
        """SELECT number, digest, created_at, provenance FROM pipeline_versions
           WHERE pipeline_id = $1 AND ($2::int IS NULL OR number < $2)
           ORDER BY number DESC LIMIT $3""",
        pid,
        before,
        limit,
    )
    return [PipelineVersionView.model_validate(dict(r)) for r in rows]


async def version_document(
    conn: asyncpg.Connection, namespace: str, name: str, number: int | None
) -> dict[str, Any] | None:
    """The stored canonical document of a version (the current one when ``number`` is None)."""
    doc: dict[str, Any] | None = await conn.fetchval(
        """SELECT v.document FROM pipelines p JOIN pipeline_versions v ON v.pipeline_id = p.id
           WHERE p.namespace = $1 AND p.name = $2
             AND CASE WHEN $3::int IS NULL THEN v.id = p.current_version_id
                      ELSE v.number = $3 END""",
        namespace,
        name,
        number,
    )
    return doc


_CONNECTION_COLUMNS = """namespace, name, type, settings,
    ARRAY(SELECT jsonb_object_keys(secrets) ORDER BY 1) AS secret_fields,
    created_at, updated_at, last_check_at, last_check_ok, last_check_message"""


async def connections(
    conn: asyncpg.Connection, namespace: str, *, after: str | None, limit: int
) -> list[ConnectionView]:
    rows = await conn.fetch(
        f"""SELECT {_CONNECTION_COLUMNS} FROM connections
            WHERE namespace = $1 AND ($2::text IS NULL OR name > $2) ORDER BY name LIMIT $3""",
        namespace,
        after,
        limit,
    )
    return [ConnectionView.model_validate(dict(r)) for r in rows]


async def connection(conn: asyncpg.Connection, namespace: str, name: str) -> ConnectionView | None:
    row = await conn.fetchrow(
        f"SELECT {_CONNECTION_COLUMNS} FROM connections WHERE namespace = $1 AND name = $2",
        namespace,
        name,
    )
    return None if row is None else ConnectionView.model_validate(dict(row))


async def workers(conn: asyncpg.Connection, *, after: str | None, limit: int) -> list[WorkerView]:
    rows = await conn.fetch(
        """SELECT id, hostname, version, status, plugins, tags, concurrency, started_at,
                  last_seen_at
           FROM workers WHERE ($1::text IS NULL OR id > $1) ORDER BY id LIMIT $2""",
        after,
        limit,
    )
    return [WorkerView.model_validate(dict(r)) for r in rows]


_ARTIFACT_COLUMNS = """a.id, a.run_id, a.attempt_id, s.step, a.name, a.content_type, a.size,
    a.digest, CASE WHEN a.uri IS NULL THEN 'inline' ELSE 'uri' END AS stored, a.created_at"""
_ARTIFACT_FROM = """FROM artifact_refs a JOIN runs r ON r.id = a.run_id
    LEFT JOIN step_attempts s ON s.id = a.attempt_id"""


async def artifacts(
    conn: asyncpg.Connection, run_id: int, *, after: int | None, limit: int
) -> list[ArtifactView]:
    """A run's artifacts in write order."""
    rows = await conn.fetch(
        f"""SELECT {_ARTIFACT_COLUMNS} {_ARTIFACT_FROM}
            WHERE a.run_id = $1 AND ($2::bigint IS NULL OR a.id > $2) ORDER BY a.id LIMIT $3""",
        run_id,
        after,
        limit,
    )
    return [ArtifactView.model_validate(dict(r)) for r in rows]


async def artifact(
    conn: asyncpg.Connection, namespace: str, run_id: int, artifact_id: int
) -> tuple[ArtifactView, Any, str | None] | None:
    """One artifact's metadata with its inline value or its URI (exactly one is set)."""
    row = await conn.fetchrow(
        f"""SELECT {_ARTIFACT_COLUMNS}, a.inline, a.uri {_ARTIFACT_FROM}
            WHERE r.namespace = $1 AND a.run_id = $2 AND a.id = $3""",
        namespace,
        run_id,
        artifact_id,
    )
    if row is None:
        return None
    data = dict(row)
    inline, uri = data.pop("inline"), data.pop("uri")
    return ArtifactView.model_validate(data), inline, uri


async def run_status(conn: asyncpg.Connection, namespace: str, run_id: int) -> str | None:
    found: str | None = await conn.fetchval(
        "SELECT status FROM runs WHERE namespace = $1 AND id = $2", namespace, run_id
    )
    return found


async def run_end_position(conn: asyncpg.Connection, run_id: int) -> tuple[int, int] | None:
    """Where the run's last event sits in the event order, once the run has finished.

    None while the run is in flight. Read in one snapshot with the run's status: the
    transaction that finished the run wrote its events, so they are all below this position.
    """
    row = await conn.fetchrow(
        """SELECT e.xid::text::bigint AS xid, e.id FROM runs r
           JOIN LATERAL (SELECT xid, id FROM engine_events WHERE run_id = r.id
                         ORDER BY xid DESC, id DESC LIMIT 1) e ON true
           WHERE r.id = $1 AND r.status = ANY($2::text[])""",
        run_id,
        list(TERMINAL_RUN),
    )
    return None if row is None else (int(row["xid"]), int(row["id"]))


async def ping(conn: asyncpg.Connection) -> bool:
    return bool(await conn.fetchval("SELECT true"))
