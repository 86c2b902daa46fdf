"""Failure paths: upstream_failed, probe-error and recovery counts, the remote-cancel outbox,
and per-run manual retry keys.

Revision ID: 0005_failure_paths
Revises: 0004_engine_events
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0005_failure_paths"
down_revision: str | None = "0004_engine_events"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD = "'pending', 'queued', 'running', 'waiting', 'succeeded', 'failed', 'skipped', 'cancelled'"
_NEW = _OLD + ", 'upstream_failed'"
_TABLES = ("run_items", "step_attempts", "run_steps")


def _status_check(values: str) -> None:
    for table in _TABLES:
        op.drop_constraint(op.f(f"ck_{table}_status"), table, type_="check")
        op.create_check_constraint(op.f(f"ck_{table}_status"), table, f"status IN ({values})")


def upgrade() -> None:
    _status_check(_NEW)
    for name in ("probe_errors", "recoveries"):
        op.add_column(
            "step_attempts",
            sa.Column(name, sa.Integer(), server_default=sa.text("0"), nullable=False),
        )
    op.add_column(
        "step_attempts",
        sa.Column("remote_cancelled_at", postgresql.TIMESTAMP(timezone=True), nullable=True),
    )
    # Manual retry keys were stored as "<key>#<item>" and unique across runs.
    op.drop_index("uq_step_attempts_idempotency_key", table_name="step_attempts")
    op.execute(
        "UPDATE step_attempts SET idempotency_key = regexp_replace(idempotency_key, '#[^#]*$', '') "
        "WHERE idempotency_key IS NOT NULL"
    )
    op.create_index(
        "uq_step_attempts_run_id_idempotency_key",
        "step_attempts",
        ["run_id", "idempotency_key", "item_index"],
        unique=True,
        postgresql_where=sa.text("idempotency_key IS NOT NULL"),
        postgresql_nulls_not_distinct=True,
    )
    op.create_index(
        "ix_step_attempts_remote_cancel_owed",
        "step_attempts",
        ["id"],
        postgresql_where=sa.text(
            "status = 'cancelled' AND handle IS NOT NULL AND remote_cancelled_at IS NULL"
        ),
    )


def downgrade() -> None:
    op.drop_index("ix_step_attempts_remote_cancel_owed", table_name="step_attempts")
    op.drop_index("uq_step_attempts_run_id_idempotency_key", table_name="step_attempts")
    op.execute(
        "UPDATE step_attempts SET idempotency_key = idempotency_key || '#' || coalesce(item_index::text, '') "
        "WHERE idempotency_key IS NOT NULL"
    )
    op.create_index(
        "uq_step_attempts_idempotency_key",
        "step_attempts",
        ["idempotency_key"],
        unique=True,
        postgresql_where=sa.text("idempotency_key IS NOT NULL"),
    )
    for name in ("remote_cancelled_at", "recoveries", "probe_errors"):
        op.drop_column("step_attempts", name)
    op.execute("UPDATE run_steps SET status = 'skipped' WHERE status = 'upstream_failed'")
    _status_check(_OLD)
