"""Reads of schedules, webhooks, their histories, notifications and run reports."""

from __future__ import annotations

import asyncpg

from dirigent.engine.store.alerts import REPORT_ARTIFACT
from dirigent.engine.trigger_views import (
    DeliveryView,
    FiringView,
    NotificationView,
    ScheduleView,
    WebhookView,
)


async def schedule(conn: asyncpg.Connection, namespace: str, name: str) -> ScheduleView | None:
    row = await conn.fetchrow(
        """SELECT namespace, name, pipeline, paused, next_fire_at, last_fire_at, last_run_id,
                  last_error FROM schedules WHERE namespace = $1 AND name = $2""",
        namespace,
        name,
    )
    return None if row is None else ScheduleView.model_validate(dict(row))


async def firings(
    conn: asyncpg.Connection, namespace: str, name: str, limit: int
) -> list[FiringView]:
    rows = await conn.fetch(
        """SELECT f.id, f.scheduled_for, f.fired_at, f.result, f.misfire, f.run_id, f.message
           FROM schedule_firings f JOIN schedules s ON s.id = f.schedule_id
           WHERE s.namespace = $1 AND s.name = $2 ORDER BY f.id DESC LIMIT $3""",
        namespace,
        name,
        limit,
    )
    return [FiringView.model_validate(dict(r)) for r in rows]


async def webhook(conn: asyncpg.Connection, namespace: str, name: str) -> WebhookView | None:
    row = await conn.fetchrow(
        """SELECT namespace, name, pipeline, enabled, '/hooks/' || token_prefix || '…' AS path,
                  last_delivery_at, last_delivery_result
           FROM webhooks WHERE namespace = $1 AND name = $2""",
        namespace,
        name,
    )
    return None if row is None else WebhookView.model_validate(dict(row))


async def deliveries(
    conn: asyncpg.Connection, namespace: str, name: str, limit: int
) -> list[DeliveryView]:
    rows = await conn.fetch(
        """SELECT d.id, d.received_at, d.result, d.reason, d.status_code, d.run_id, d.message
           FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
           WHERE w.namespace = $1 AND w.name = $2 ORDER BY d.id DESC LIMIT $3""",
        namespace,
        name,
        limit,
    )
    return [DeliveryView.model_validate(dict(r)) for r in rows]


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
