"""A partial index of running fan-out steps, for the sweeper's counted-but-unsettled repair.

A fan-out's items are counted without the run's lock and the step they end is settled in a
second transaction (``store/counting.py``); a crash between the two leaves a running step
whose counters say it is done. The sweeper looks for those on every pass, so it reads only
running fan-outs, never the settled history.

Revision ID: 0015_running_fan_outs
Revises: 0014_claim_plan
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015_running_fan_outs"
down_revision: str | None = "0014_claim_plan"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_run_steps_running_fan_outs",
        "run_steps",
        ["run_id"],
        postgresql_where=sa.text("status = 'running' AND items IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_run_steps_running_fan_outs", table_name="run_steps")
