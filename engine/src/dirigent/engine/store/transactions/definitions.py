"""Definitions: pipelines and their immutable versions, applied by digest.

Apply is idempotent by construction: the canonical digest of an unchanged document equals
the current version's, and then nothing is written. A changed document inserts a new
version; runs pin the version they started from, so an edit never changes a run in flight.
"""

from __future__ import annotations

import enum
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import asyncpg

from dirigent.engine.shapes.manifests.export import canonical_dict, digest
from dirigent.engine.shapes.manifests.pipeline import Pipeline
from dirigent.engine.shapes.problems import ProblemsError, problem
from dirigent.engine.shapes.statuses import RunStatus
from dirigent.engine.store.pool import affected


class ApplyAction(enum.StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    ACTIVATED = "activated"  # the same document, re-applied to a deactivated pipeline


@dataclass(frozen=True)
class ApplyResult:
    action: ApplyAction
    pipeline_id: int
    version_id: int
    version: int
    digest: str


@dataclass(frozen=True)
class PipelineRecord:
    id: int
    namespace: str
    name: str
    active: bool
    version_id: int | None
    version: int | None
    digest: str | None
    document: dict[str, Any] | None


async def apply_pipeline(
    conn: asyncpg.Connection,
    pipeline: Pipeline,
    *,
    namespace: str,
    provenance: dict[str, Any] | None = None,
    owner_uid: str | None = None,
) -> ApplyResult:
    """Create, version, or leave unchanged. Call inside a transaction."""
    doc = canonical_dict(pipeline)
    doc["metadata"]["namespace"] = namespace
    the_digest = digest(
        pipeline.model_copy(
            update={"metadata": pipeline.metadata.model_copy(update={"namespace": namespace})}
        )
    )
    importance = pipeline.spec.importance.engine_value
    deletion = pipeline.spec.deletion_policy.engine_value
    row = await conn.fetchrow(
        """
        SELECT p.id, p.active, v.id AS version_id, v.number, v.digest
        FROM pipelines p LEFT JOIN pipeline_versions v ON v.id = p.current_version_id
        WHERE p.namespace = $1 AND p.name = $2
        FOR UPDATE OF p
        """,
        namespace,
        pipeline.metadata.name,
    )
    if row is None:
        pid = await conn.fetchval(
            """
            INSERT INTO pipelines (namespace, name, active, importance, deletion_policy, owner_uid)
            VALUES ($1, $2, true, $3, $4, $5) RETURNING id
            """,
            namespace,
            pipeline.metadata.name,
            importance,
            deletion,
            owner_uid,
        )
        vid = await _insert_version(conn, pid, 1, the_digest, doc, provenance)
        return ApplyResult(ApplyAction.CREATED, pid, vid, 1, the_digest)
    if row["digest"] == the_digest:
        if row["active"]:
            return ApplyResult(
                ApplyAction.UNCHANGED, row["id"], row["version_id"], row["number"], the_digest
            )
        await conn.execute(
            "UPDATE pipelines SET active = true, updated_at = now() WHERE id = $1", row["id"]
        )
        return ApplyResult(
            ApplyAction.ACTIVATED, row["id"], row["version_id"], row["number"], the_digest
        )
    number = (row["number"] or 0) + 1
    vid = await _insert_version(conn, row["id"], number, the_digest, doc, provenance)
    await conn.execute(
        """
        UPDATE pipelines SET active = true, importance = $2, deletion_policy = $3,
               owner_uid = COALESCE($4, owner_uid), updated_at = now()
        WHERE id = $1
        """,
        row["id"],
        importance,
        deletion,
        owner_uid,
    )
    return ApplyResult(ApplyAction.UPDATED, row["id"], vid, number, the_digest)


async def _insert_version(
    conn: asyncpg.Connection,
    pid: int,
    number: int,
    the_digest: str,
    doc: dict[str, Any],
    provenance: dict[str, Any] | None,
) -> int:
    vid: int = await conn.fetchval(
        """
        INSERT INTO pipeline_versions (pipeline_id, number, digest, document, provenance)
        VALUES ($1, $2, $3, $4, $5) RETURNING id
        """,
        pid,
        number,
        the_digest,
        doc,
        provenance or {},
    )
    await conn.execute("UPDATE pipelines SET current_version_id = $2 WHERE id = $1", pid, vid)
    return vid


async def get_pipeline(
    conn: asyncpg.Connection, namespace: str, name: str
) -> PipelineRecord | None:
    row = await conn.fetchrow(
        """
        SELECT p.id, p.namespace, p.name, p.active, v.id AS version_id, v.number, v.digest, v.document
        FROM pipelines p LEFT JOIN pipeline_versions v ON v.id = p.current_version_id
        WHERE p.namespace = $1 AND p.name = $2
        """,
        namespace,
        name,
    )
    if row is None:
        return None
    return PipelineRecord(
        row["id"],
        row["namespace"],
        row["name"],
        row["active"],
        row["version_id"],
        row["number"],
        row["digest"],
        row["document"],
    )


async def get_version_document(conn: asyncpg.Connection, version_id: int) -> dict[str, Any]:
    doc: dict[str, Any] | None = await conn.fetchval(
        "SELECT document FROM pipeline_versions WHERE id = $1", version_id
    )
    if doc is None:
        raise LookupError(f"pipeline version {version_id} does not exist")
    return doc


async def active_among(
    conn: asyncpg.Connection, namespace: str, names: Collection[str]
) -> set[str]:
    """Which of ``names`` are active pipelines of the namespace (``requires.pipelines``)."""
    if not names:
        return set()
    rows = await conn.fetch(
        "SELECT name FROM pipelines WHERE namespace = $1 AND name = ANY($2::text[]) AND active",
        namespace,
        list(names),
    )
    return {r["name"] for r in rows}


async def set_active(conn: asyncpg.Connection, namespace: str, name: str, active: bool) -> bool:
    """Activate or deactivate; False when there is no such pipeline."""
    status: str = await conn.execute(
        "UPDATE pipelines SET active = $3, updated_at = now() WHERE namespace = $1 AND name = $2",
        namespace,
        name,
        active,
    )
    return affected(status) == 1


async def delete_pipeline(conn: asyncpg.Connection, namespace: str, name: str) -> bool:
    """Delete a pipeline and its whole history; refused while runs are in flight."""
    row = await conn.fetchrow(
        "SELECT id FROM pipelines WHERE namespace = $1 AND name = $2 FOR UPDATE", namespace, name
    )
    if row is None:
        return False
    in_flight = await conn.fetchval(
        f"SELECT count(*) FROM runs WHERE pipeline_id = $1 AND status IN ('{RunStatus.QUEUED}', '{RunStatus.RUNNING}')",
        row["id"],
    )
    if in_flight:
        raise ProblemsError(
            [
                problem(
                    "pipeline.delete.runs_in_flight",
                    f"pipeline '{name}' has {in_flight} run(s) in flight; cancel them or wait, then delete",
                    params_in_flight=in_flight,
                )
            ]
        )
    await conn.execute("UPDATE pipelines SET current_version_id = NULL WHERE id = $1", row["id"])
    await conn.execute("DELETE FROM runs WHERE pipeline_id = $1", row["id"])
    await conn.execute("DELETE FROM pipeline_versions WHERE pipeline_id = $1", row["id"])
    await conn.execute("DELETE FROM pipelines WHERE id = $1", row["id"])
    return True
