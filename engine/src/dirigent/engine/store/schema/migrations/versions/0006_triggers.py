"""Triggers and alerting: schedules and their firings, webhooks and their deliveries,
notifications.

Revision ID: 0006_triggers
Revises: 0005_failure_paths
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006_triggers"
down_revision: str | None = "0005_failure_paths"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = postgresql.TIMESTAMP(timezone=True)


def _id() -> sa.Column[Any]:
    return sa.Column("id", sa.BigInteger(), sa.Identity(), primary_key=True)


def _ts(name: str, *, nullable: bool = True, now: bool = False) -> sa.Column[Any]:
    return sa.Column(name, TS, nullable=nullable, server_default=sa.text("now()") if now else None)


def _jsonb(name: str, *, nullable: bool = True, default: str | None = None) -> sa.Column[Any]:
    server_default = sa.text(f"'{default}'::jsonb") if default is not None else None
    return sa.Column(name, postgresql.JSONB(), nullable=nullable, server_default=server_default)


def _enum(name: str, values: Sequence[str], default: str | None = None) -> list[Any]:
    listed = ", ".join(f"'{v}'" for v in values)
    return [
        sa.Column(
            name,
            sa.String(32),
            nullable=False,
            server_default=sa.text(f"'{default}'") if default is not None else None,
        ),
        sa.CheckConstraint(f"{name} IN ({listed})", name=name),
    ]


def _run_fk(name: str) -> sa.Column[Any]:
    return sa.Column(name, sa.BigInteger(), sa.ForeignKey("runs.id", ondelete="SET NULL"))


def upgrade() -> None:
    op.create_table(
        "schedules",
        _id(),
        sa.Column("namespace", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("pipeline", sa.Text(), nullable=False),
        _jsonb("spec", nullable=False),
        sa.Column("digest", sa.CHAR(64), nullable=False),
        sa.Column("cron", sa.Text(), nullable=True),
        sa.Column("interval_ms", sa.BigInteger(), nullable=True),
        _ts("at"),
        sa.Column("timezone", sa.Text(), nullable=False, server_default=sa.text("'UTC'")),
        _jsonb("params", nullable=False, default="{}"),
        sa.Column("priority", sa.SmallInteger(), nullable=True),
        sa.Column("paused", sa.Boolean(), nullable=False, server_default=sa.text("false")),
        _ts("next_fire_at"),
        _ts("last_fire_at"),
        _run_fk("last_run_id"),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("owner_uid", sa.Text(), nullable=True),
        _ts("created_at", nullable=False, now=True),
        _ts("updated_at", nullable=False, now=True),
        sa.UniqueConstraint("namespace", "name"),
    )
    op.create_index(
        "ix_schedules_next_fire_at_due",
        "schedules",
        ["next_fire_at"],
        postgresql_where=sa.text("next_fire_at IS NOT NULL"),
    )
    op.create_table(
        "schedule_firings",
        _id(),
        sa.Column(
            "schedule_id",
            sa.BigInteger(),
            sa.ForeignKey("schedules.id", ondelete="CASCADE"),
            nullable=False,
        ),
        _ts("scheduled_for", nullable=False),
        _ts("fired_at", nullable=False, now=True),
        *_enum("result", ("fired", "failed")),
        sa.Column("misfire", sa.Boolean(), nullable=False, server_default=sa.text("false")),
        _run_fk("run_id"),
        sa.Column("message", sa.Text(), nullable=True),
    )
    op.create_index(
        "ix_schedule_firings_schedule_id_id", "schedule_firings", ["schedule_id", "id"]
    )
    op.create_table(
        "webhooks",
        _id(),
        sa.Column("namespace", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("pipeline", sa.Text(), nullable=False),
        _jsonb("spec", nullable=False),
        sa.Column("digest", sa.CHAR(64), nullable=False),
        sa.Column("token_hash", sa.CHAR(64), nullable=False),
        sa.Column("token_prefix", sa.Text(), nullable=False),
        sa.Column("hmac_secret", sa.Text(), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False, server_default=sa.text("true")),
        sa.Column("owner_uid", sa.Text(), nullable=True),
        _ts("created_at", nullable=False, now=True),
        _ts("updated_at", nullable=False, now=True),
        _ts("last_delivery_at"),
        sa.Column("last_delivery_result", sa.Text(), nullable=True),
        sa.UniqueConstraint("namespace", "name"),
        sa.UniqueConstraint("token_hash"),
    )
    op.create_table(
        "webhook_deliveries",
        _id(),
        sa.Column(
            "webhook_id",
            sa.BigInteger(),
            sa.ForeignKey("webhooks.id", ondelete="CASCADE"),
            nullable=True,
        ),
        _ts("received_at", nullable=False, now=True),
        *_enum("result", ("accepted", "refused")),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("status_code", sa.SmallInteger(), nullable=False),
        _run_fk("run_id"),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("body_size", sa.Integer(), nullable=True),
    )
    op.create_index(
        "ix_webhook_deliveries_webhook_id_id", "webhook_deliveries", ["webhook_id", "id"]
    )
    _notifications()


def _notifications() -> None:
    op.create_table(
        "notifications",
        _id(),
        sa.Column(
            "run_id",
            sa.BigInteger(),
            sa.ForeignKey("runs.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "pipeline_id",
            sa.BigInteger(),
            sa.ForeignKey("pipelines.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("rule", sa.Text(), nullable=False),
        *_enum(
            "event", ("run_failed", "run_completed_with_errors", "run_succeeded", "run_stuck")
        ),
        sa.Column("notifier", sa.Text(), nullable=False),
        sa.Column("connection", sa.Text(), nullable=True),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        _jsonb("snapshot", nullable=False, default="{}"),
        *_enum("status", ("queued", "running", "delivered", "failed"), default="queued"),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        _ts("available_at", nullable=False, now=True),
        sa.Column("lease_owner", sa.Text(), nullable=True),
        _ts("lease_expires_at"),
        sa.Column("last_error", sa.Text(), nullable=True),
        _ts("created_at", nullable=False, now=True),
        _ts("delivered_at"),
        sa.UniqueConstraint("run_id", "rule", "event"),
    )
    op.create_index(
        "ix_notifications_available_at_queued",
        "notifications",
        ["available_at"],
        postgresql_where=sa.text("status = 'queued'"),
    )
    op.create_index(
        "ix_notifications_lease_expires_at_running",
        "notifications",
        ["lease_expires_at"],
        postgresql_where=sa.text("status = 'running'"),
    )
    op.create_index(
        "ix_notifications_pipeline_id_rule_created_at",
        "notifications",
        ["pipeline_id", "rule", "created_at"],
    )


def downgrade() -> None:
    for table in ("notifications", "webhook_deliveries", "webhooks", "schedule_firings", "schedules"):
        op.drop_table(table)
