"""Read models: what a watcher, the CLI or (later) the API reads about a run.

Reads stay small whatever the fan-out size: step states come from ``run_steps`` (one row per
step), never from folding every attempt.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg


@dataclass(frozen=True)
class StepView:
    step: str
    status: str
    items: int | None
    items_succeeded: int
    items_failed: int
    started_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True)
class RunView:
    id: int
    pipeline: str
    status: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    failed_step: str | None
    error_message: str | None
    steps: list[StepView]


@dataclass(frozen=True)
class LogView:
    id: int
    step: str | None
    level: str
    message: str
    fields: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True)
class FailureView:
    step: str
    block: str
    number: int
    item_index: int | None
    error_class: str | None
    error_code: str | None
    error_message: str | None


async def run_view(conn: asyncpg.Connection, run_id: int) -> RunView | None:
    run = await conn.fetchrow(
        """SELECT r.id, p.name, r.status, r.created_at, r.started_at, r.finished_at, r.failed_step,
                  r.error_message
           FROM runs r JOIN pipelines p ON p.id = r.pipeline_id WHERE r.id = $1""",
        run_id,
    )
    if run is None:
        return None
    steps = await conn.fetch(
        """SELECT step, status, items, items_succeeded, items_failed, started_at, finished_at
           FROM run_steps WHERE run_id = $1 ORDER BY started_at NULLS LAST, step""",
        run_id,
    )
    return RunView(
        run["id"],
        run["name"],
        run["status"],
        run["created_at"],
        run["started_at"],
        run["finished_at"],
        run["failed_step"],
        run["error_message"],
        [StepView(*s) for s in steps],
    )


async def logs_after(
    conn: asyncpg.Connection, run_id: int, after: int = 0, limit: int = 500
) -> list[LogView]:
    rows = await conn.fetch(
        """SELECT id, step, level, message, fields, created_at FROM log_entries
           WHERE run_id = $1 AND id > $2 ORDER BY id LIMIT $3""",
        run_id,
        after,
        limit,
    )
    return [LogView(*r) for r in rows]


async def failures(conn: asyncpg.Connection, run_id: int) -> list[FailureView]:
    """The last failed attempt of each failed step or item: what a diagnosis prints."""
    rows = await conn.fetch(
        """SELECT DISTINCT ON (step, item_index) step, block, number, item_index, error_class, error_code,
                  error_message
           FROM step_attempts WHERE run_id = $1 AND status = 'failed'
           ORDER BY step, item_index, number DESC""",
        run_id,
    )
    return [FailureView(*r) for r in rows]
