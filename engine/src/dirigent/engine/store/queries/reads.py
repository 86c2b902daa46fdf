"""Reads: the queries behind the engine's views (``dirigent.engine.shapes.views``).

Reads stay small whatever the fan-out size: step states come from ``run_steps`` (one row per
step) and item and attempt counts from one grouped count each, never from folding every
attempt in Python. Lists are keyset pages: the caller passes the last key it saw.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import asyncpg
from pydantic import BaseModel

from dirigent.engine.shapes.manifests import dag
from dirigent.engine.shapes.statuses import ATTEMPT_TERMINAL, RunStatus, WorkStatus
from dirigent.engine.shapes.views import (
    AttemptView,
    DeliveryView,
    FailureView,
    FiringView,
    ItemView,
    LogView,
    NotificationView,
    PipelineSummary,
    RunDetail,
    RunSummary,
    ScheduleView,
    StepDetail,
    WebhookView,
)
from dirigent.engine.store.schema.tables import REPORT_ARTIFACT

V = TypeVar("V", bound=BaseModel)


async def failures(conn: asyncpg.Connection, run_id: int) -> list[FailureView]:
    """The last failed attempt of each failed step or item: what a diagnosis prints."""
    rows = await conn.fetch(
        f"""SELECT DISTINCT ON (step, item_index) step, block, number, item_index, error_class, error_code,
                  error_message
           FROM step_attempts WHERE run_id = $1 AND status = '{WorkStatus.FAILED}'
           ORDER BY step, item_index, number DESC""",
        run_id,
    )
    return [FailureView.model_validate(dict(r)) for r in rows]


# --- Views for the engine's door (``dirigent.engine.Engine``): built by column name. ---

_LAST_RUN = """
    LEFT JOIN LATERAL (
        SELECT r.id, r.status, r.created_at, r.started_at, r.finished_at, r.failed_step,
               r.error_message
        FROM runs r WHERE r.pipeline_id = p.id ORDER BY r.id DESC LIMIT 1
    ) last ON true
"""


async def pipeline_summaries(
    conn: asyncpg.Connection,
    namespace: str,
    *,
    after: str | None,
    limit: int,
    only: str | None = None,
) -> list[PipelineSummary]:
    """Pipelines by name after ``after`` (or just ``only``), each with its runs in flight, its
    schedules and webhooks, and its newest run (where it failed, when it did)."""
    rows = await conn.fetch(
        f"""SELECT p.namespace, p.name, p.active, p.updated_at, v.number AS version, v.digest,
                   v.document #>> '{{spec,title}}' AS title,
                   (SELECT count(*) FROM runs f WHERE f.pipeline_id = p.id
                      AND f.status IN ('{RunStatus.QUEUED}', '{RunStatus.RUNNING}')) AS runs_in_flight,
                   (SELECT count(*) FROM schedules s
                    WHERE s.namespace = p.namespace AND s.pipeline = p.name) AS schedules,
                   (SELECT count(*) FROM webhooks w
                    WHERE w.namespace = p.namespace AND w.pipeline = p.name) AS webhooks,
                   to_jsonb(last) AS last_run
            FROM pipelines p LEFT JOIN pipeline_versions v ON v.id = p.current_version_id
            {_LAST_RUN}
            WHERE p.namespace = $1 AND ($2::text IS NULL OR p.name > $2)
              AND ($4::text IS NULL OR p.name = $4)
            ORDER BY p.name LIMIT $3""",
        namespace,
        after,
        limit,
        only,
    )
    return [_summary(r) for r in rows]


def _summary(row: asyncpg.Record) -> PipelineSummary:
    data = dict(row)
    last = data.pop("last_run")
    return PipelineSummary.model_validate(
        {**data, "last_run": last if last and last.get("id") is not None else None}
    )


_RUN_COLUMNS = """r.id, r.namespace, p.name AS pipeline, v.number AS version, r.status,
    r.triggered_by_kind, r.triggered_by_ref, r.created_at, r.started_at, r.finished_at,
    r.failed_step, r.error_message, r.window_start, r.window_end"""
_RUN_FROM = """FROM runs r JOIN pipelines p ON p.id = r.pipeline_id
    JOIN pipeline_versions v ON v.id = r.version_id"""


@dataclass(frozen=True)
class RunFilter:
    pipeline: str | None = None
    status: str | None = None
    triggered_by_kind: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None


async def run_summaries(
    conn: asyncpg.Connection,
    namespace: str,
    where: RunFilter,
    *,
    before_id: int | None,
    limit: int,
) -> list[RunSummary]:
    """Runs newest first, keyset on id."""
    rows = await conn.fetch(
        f"""SELECT {_RUN_COLUMNS} {_RUN_FROM}
            WHERE r.namespace = $1 AND ($2::text IS NULL OR p.name = $2)
              AND ($3::text IS NULL OR r.status = $3)
              AND ($4::text IS NULL OR r.triggered_by_kind = $4)
              AND ($5::timestamptz IS NULL OR r.created_at >= $5)
              AND ($6::timestamptz IS NULL OR r.created_at < $6)
              AND ($7::bigint IS NULL OR r.id < $7)
            ORDER BY r.id DESC LIMIT $8""",
        namespace,
        where.pipeline,
        where.status,
        where.triggered_by_kind,
        where.created_after,
        where.created_before,
        before_id,
        limit,
    )
    return [RunSummary.model_validate(dict(r)) for r in rows]


async def run_detail(conn: asyncpg.Connection, namespace: str, run_id: int) -> RunDetail | None:
    """The run and its DAG, folded from the ``run_steps`` row of each step and its counters.

    Item and attempt counts come from the counters kept on ``run_steps`` (items as they
    record, attempts by a trigger as they are inserted), so the read never touches the
    fan-out grid or its attempts: two rows and one row per step, whatever the fan-out.
    """
    run = await conn.fetchrow(
        f"""SELECT {_RUN_COLUMNS}, r.params, r.parent_run_id, v.document -> 'spec' -> 'steps' AS spec
            {_RUN_FROM} WHERE r.namespace = $1 AND r.id = $2""",
        namespace,
        run_id,
    )
    if run is None:
        return None
    steps = await conn.fetch(
        """SELECT s.step, s.status, s.items, s.items_succeeded, s.items_failed, s.items_skipped,
                  s.items_cancelled, s.with_errors, s.started_at, s.finished_at, s.attempts
           FROM run_steps s WHERE s.run_id = $1""",
        run_id,
    )
    data = dict(run)
    spec: dict[str, Any] = data.pop("spec") or {}
    details = [_step_detail(dict(s), spec) for s in steps]
    # DAG order (layer by layer): the stored document is JSONB, whose keys are not in the
    # manifest's order.
    order = dag.topological_order({n: s.get("dependsOn", []) for n, s in spec.items()})
    details.sort(key=lambda d: order.index(d.step) if d.step in order else len(order))
    return RunDetail.model_validate({**data, "steps": details})


def items_by_status(row: dict[str, Any]) -> dict[str, int]:
    """A fan-out's items by status from the step's counters; the non-terminal rest: pending."""
    if row["items"] is None:
        return {}
    counts: dict[str, int] = {str(s): row[f"items_{s}"] for s in ATTEMPT_TERMINAL}
    counts["pending"] = row["items"] - sum(counts.values())
    return {status: n for status, n in counts.items() if n}


def _step_detail(row: dict[str, Any], spec: dict[str, Any]) -> StepDetail:
    step_spec = spec.get(row["step"], {})
    started, finished = row["started_at"], row["finished_at"]
    return StepDetail.model_validate(
        {
            **row,
            "block": step_spec.get("block", ""),
            "depends_on": step_spec.get("dependsOn", []),
            "items_by_status": items_by_status(row),
            "duration_seconds": (finished - started).total_seconds()
            if started and finished
            else None,
        }
    )


async def items_page(
    conn: asyncpg.Connection, run_id: int, step: str, *, after: int | None, limit: int
) -> list[ItemView]:
    rows = await conn.fetch(
        """SELECT id, step, index, status, value, error_message, created_at, finished_at
           FROM run_items WHERE run_id = $1 AND step = $2 AND ($3::int IS NULL OR index > $3)
           ORDER BY index LIMIT $4""",
        run_id,
        step,
        after,
        limit,
    )
    return [ItemView.model_validate(dict(r)) for r in rows]


async def attempts_page(
    conn: asyncpg.Connection, run_id: int, step: str | None, *, after: int | None, limit: int
) -> list[AttemptView]:
    rows = await conn.fetch(
        """SELECT id, step, item_index, number, kind, status, block, created_at, started_at,
                  finished_at, wait_message, wait_progress, error_class, error_code,
                  error_message, output
           FROM step_attempts WHERE run_id = $1 AND ($2::text IS NULL OR step = $2)
             AND ($3::bigint IS NULL OR id > $3)
           ORDER BY id LIMIT $4""",
        run_id,
        step,
        after,
        limit,
    )
    return [AttemptView.model_validate(dict(r)) for r in rows]


async def logs_page(
    conn: asyncpg.Connection, run_id: int, *, after: int | None, limit: int
) -> list[LogView]:
    rows = await conn.fetch(
        """SELECT id, attempt_id, step, level, message, fields, created_at FROM log_entries
           WHERE run_id = $1 AND ($2::bigint IS NULL OR id > $2) ORDER BY id LIMIT $3""",
        run_id,
        after,
        limit,
    )
    return [LogView.model_validate(dict(r)) for r in rows]


async def run_namespace(conn: asyncpg.Connection, run_id: int) -> str | None:
    found: str | None = await conn.fetchval("SELECT namespace FROM runs WHERE id = $1", run_id)
    return found


async def runs_in_flight(conn: asyncpg.Connection, namespace: str, pipeline: str) -> list[int]:
    rows = await conn.fetch(
        f"""SELECT r.id FROM runs r JOIN pipelines p ON p.id = r.pipeline_id
           WHERE p.namespace = $1 AND p.name = $2 AND r.status IN ('{RunStatus.QUEUED}', '{RunStatus.RUNNING}')
           ORDER BY r.id""",
        namespace,
        pipeline,
    )
    return [int(r["id"]) for r in rows]


# --- Triggers: schedules, webhooks, their histories, notifications and run reports ---


_SCHEDULE_COLUMNS = """namespace, name, pipeline, paused, next_fire_at, last_fire_at, last_run_id,
    last_error"""
# A webhook is shown by the prefix of its token, never the token (the engine keeps its hash).
_WEBHOOK_COLUMNS = """namespace, name, pipeline, enabled, '/hooks/' || token_prefix || '…' AS path,
    last_delivery_at, last_delivery_result"""


async def schedules(
    conn: asyncpg.Connection,
    namespace: str,
    *,
    after: str | None,
    limit: int,
    only: str | None = None,
) -> list[ScheduleView]:
    """Schedules by name after ``after`` (or just ``only``)."""
    sql = _by_name("schedules", _SCHEDULE_COLUMNS)
    return _views(ScheduleView, await conn.fetch(sql, namespace, after, limit, only))


async def webhooks(
    conn: asyncpg.Connection,
    namespace: str,
    *,
    after: str | None,
    limit: int,
    only: str | None = None,
) -> list[WebhookView]:
    """Webhooks by name after ``after`` (or just ``only``)."""
    sql = _by_name("webhooks", _WEBHOOK_COLUMNS)
    return _views(WebhookView, await conn.fetch(sql, namespace, after, limit, only))


def _by_name(table: str, columns: str) -> str:
    """A keyset page by name of a namespaced table: $1 namespace, $2 after, $3 limit, $4 only."""
    return f"""SELECT {columns} FROM {table}
               WHERE namespace = $1 AND ($2::text IS NULL OR name > $2)
                 AND ($4::text IS NULL OR name = $4)
               ORDER BY name LIMIT $3"""


async def firings(
    conn: asyncpg.Connection, namespace: str, name: str, limit: int
) -> list[FiringView]:
    sql = """SELECT f.id, f.scheduled_for, f.fired_at, f.result, f.misfire, f.run_id, f.message
             FROM schedule_firings f JOIN schedules s ON s.id = f.schedule_id
             WHERE s.namespace = $1 AND s.name = $2 ORDER BY f.id DESC LIMIT $3"""
    return _views(FiringView, await conn.fetch(sql, namespace, name, limit))


async def deliveries(
    conn: asyncpg.Connection, namespace: str, name: str, limit: int
) -> list[DeliveryView]:
    sql = """SELECT d.id, d.received_at, d.result, d.reason, d.status_code, d.run_id, d.message
             FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
             WHERE w.namespace = $1 AND w.name = $2 ORDER BY d.id DESC LIMIT $3"""
    return _views(DeliveryView, await conn.fetch(sql, namespace, name, limit))


def _views(view: type[V], rows: list[asyncpg.Record]) -> list[V]:
    return [view.model_validate(dict(r)) for r in rows]


async def notifications(conn: asyncpg.Connection, run_id: int) -> list[NotificationView]:
    rows = await conn.fetch(
        """SELECT id, run_id, rule, event, notifier, status, attempts, subject, body, last_error,
                  created_at, delivered_at
           FROM notifications WHERE run_id = $1 ORDER BY id""",
        run_id,
    )
    return [NotificationView.model_validate(dict(r)) for r in rows]


async def report(conn: asyncpg.Connection, run_id: int) -> str | None:
    value = await conn.fetchval(
        """SELECT inline FROM artifact_refs WHERE run_id = $1 AND attempt_id IS NULL AND name = $2
           ORDER BY id DESC LIMIT 1""",
        run_id,
        REPORT_ARTIFACT,
    )
    return value if isinstance(value, str) else None
