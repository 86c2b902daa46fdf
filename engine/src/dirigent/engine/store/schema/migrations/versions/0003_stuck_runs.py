"""Stuck-run detection: when the sweeper found a run without progress.

Revision ID: 0003_stuck_runs
Revises: 0002_run_steps
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003_stuck_runs"
down_revision: str | None = "0002_run_steps"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("stuck_at", postgresql.TIMESTAMP(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "stuck_at")
