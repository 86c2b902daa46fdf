"""Per-step run state and claim fairness.

Revision ID: 0002_run_steps
Revises: 0001_baseline
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002_run_steps"
down_revision: str | None = "0001_baseline"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WORK = "'pending', 'queued', 'running', 'waiting', 'succeeded', 'failed', 'skipped', 'cancelled'"


def upgrade() -> None:
    op.add_column("runs", sa.Column("queued_seq", sa.BigInteger(), server_default=sa.text("0"), nullable=False))
    op.add_column(
        "step_attempts", sa.Column("fair_seq", sa.BigInteger(), server_default=sa.text("0"), nullable=False)
    )
    op.drop_index("ix_step_attempts_claim_queued", table_name="step_attempts")
    op.create_index(
        "ix_step_attempts_claim_queued",
        "step_attempts",
        [sa.text("priority DESC"), "fair_seq", "available_at", "id"],
        postgresql_where=sa.text("status = 'queued'"),
    )
    op.create_table(
        "run_steps",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("run_id", sa.BigInteger(), nullable=False),
        sa.Column("step", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=32), server_default=sa.text("'pending'"), nullable=False),
        sa.Column("items", sa.Integer(), nullable=True),
        sa.Column("items_succeeded", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("items_failed", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("items_skipped", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("items_cancelled", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("with_errors", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("started_at", postgresql.TIMESTAMP(timezone=True), nullable=True),
        sa.Column("finished_at", postgresql.TIMESTAMP(timezone=True), nullable=True),
        sa.CheckConstraint(f"status IN ({WORK})", name=op.f("ck_run_steps_status")),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_run_steps_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run_steps")),
        sa.UniqueConstraint("run_id", "step", name=op.f("uq_run_steps_run_id_step")),
    )


def downgrade() -> None:
    op.drop_table("run_steps")
    op.drop_index("ix_step_attempts_claim_queued", table_name="step_attempts")
    op.create_index(
        "ix_step_attempts_claim_queued",
        "step_attempts",
        [sa.text("priority DESC"), "available_at", "id"],
        postgresql_where=sa.text("status = 'queued'"),
    )
    op.drop_column("step_attempts", "fair_seq")
    op.drop_column("runs", "queued_seq")
