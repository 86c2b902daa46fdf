"""Lineage: the chain of runs that started each other, and a child run as its parent sees it.

A run started by a step (``pipeline.run``) carries ``parent_run_id``; the depth guard reads
that chain with one recursive query, so it can never disagree with the runs it describes.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import asyncpg

from dirigent.engine.infrastructure.plugins import Catalog
from dirigent.engine.shapes.statuses import RUN_TERMINAL, WorkStatus
from dirigent.engine.store.transactions import runs as runs_store
from dirigent.engine.store.transactions.runs import RunCreated, RunRequest
from dirigent.engine.store.transactions.versions import VersionCache


class ChainTooDeep(Exception):
    """Starting the child would make the chain of runs deeper than allowed."""

    def __init__(self, depth: int) -> None:
        super().__init__(f"a chain of {depth} runs")
        self.depth = depth


async def start_child_run(
    conn: asyncpg.Connection,
    request: RunRequest,
    *,
    max_depth: int,
    versions: VersionCache,
    catalog: Catalog,
    enabled_unsafe: Collection[str] = (),
) -> RunCreated:
    """The engine's run-start verb for a run started by a step: the depth guard, then the
    same ``create_run`` every door uses. Call inside a transaction.

    Raises ``ChainTooDeep`` past ``max_depth``, ProblemsError when the run is refused.
    """
    if request.parent_run_id is None:
        raise ValueError("a child run names its parent run (RunRequest.parent_run_id)")
    depth = await run_depth(conn, request.parent_run_id) + 1
    if depth > max_depth:
        raise ChainTooDeep(depth)
    return await runs_store.create_run(
        conn, request, versions=versions, catalog=catalog, enabled_unsafe=enabled_unsafe
    )


async def cancel_child_run(
    conn: asyncpg.Connection, run_id: int, namespace: str, *, reason: str, versions: VersionCache
) -> bool:
    """Cancel a run a step sees (same namespace); False if none, or it had already finished.

    Call inside a transaction; the remote work of the cancelled run is told afterwards."""
    row = await child_run(conn, run_id, namespace)
    if row is None or row["status"] in RUN_TERMINAL:
        return False
    await runs_store.cancel_run(conn, run_id, reason=reason, versions=versions)
    return True


async def run_depth(conn: asyncpg.Connection, run_id: int) -> int:
    """How many runs the chain ending at ``run_id`` holds (a run nobody started: 1)."""
    depth = await conn.fetchval(
        """WITH RECURSIVE chain(id, parent_run_id, depth) AS (
               SELECT id, parent_run_id, 1 FROM runs WHERE id = $1
             UNION ALL
               SELECT r.id, r.parent_run_id, c.depth + 1
               FROM runs r JOIN chain c ON r.id = c.parent_run_id
               WHERE c.depth < 1000
           )
           SELECT max(depth) FROM chain""",
        run_id,
    )
    return int(depth or 0)


async def child_run(conn: asyncpg.Connection, run_id: int, namespace: str) -> dict[str, Any] | None:
    """A run's state and, once it finished, its top-level step outputs; None if not visible."""
    row = await conn.fetchrow(
        """SELECT r.id, r.namespace, p.name AS pipeline, r.status, r.started_at, r.finished_at,
                  r.error_message, r.failed_step
           FROM runs r JOIN pipelines p ON p.id = r.pipeline_id
           WHERE r.id = $1 AND r.namespace = $2""",
        run_id,
        namespace,
    )
    if row is None:
        return None
    found = dict(row)
    found["outputs"] = {}
    if found["status"] in RUN_TERMINAL:
        outputs = await conn.fetch(
            f"""SELECT step, output FROM step_attempts
               WHERE run_id = $1 AND status = '{WorkStatus.SUCCEEDED}' AND item_index IS NULL""",
            run_id,
        )
        found["outputs"] = {o["step"]: o["output"] for o in outputs}
    return found
