"""The hot set: what the engine touches per attempt stays small however long the history.

The claim already reads partial indexes holding only live work (``status = 'queued'``,
``'waiting'``, ``'running'``); this revision adds the two pieces that still grew with
history:

- retention finds its oldest settled runs through a partial index on ``finished_at`` (an
  index range scan of one batch, instead of sorting every settled run on each sweep);
- the tables the hot path rewrites (attempts, runs, steps, items) are vacuumed after a
  fixed number of dead rows rather than a fraction of the table, so a claim index does
  not collect millions of dead entries before autovacuum looks at a table with years of
  history in it.

Revision ID: 0008_hot_set
Revises: 0007_worker_blocks
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_hot_set"
down_revision: str | None = "0007_worker_blocks"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

HOT_TABLES = ("step_attempts", "runs", "run_steps", "run_items")
# Vacuum after 2,000 dead rows plus 1% of the table (the default is 50 + 20%).
VACUUM = (
    "autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 2000, "
    "autovacuum_analyze_scale_factor = 0.02, autovacuum_analyze_threshold = 2000"
)
VACUUM_KEYS = (
    "autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, "
    "autovacuum_analyze_scale_factor, autovacuum_analyze_threshold"
)


def upgrade() -> None:
    op.create_index(
        "ix_runs_finished_at_settled",
        "runs",
        ["finished_at"],
        postgresql_where=sa.text(
            "status IN ('succeeded', 'completed_with_errors', 'failed', 'cancelled')"
        ),
    )
    for table in HOT_TABLES:
        op.execute(f"ALTER TABLE {table} SET ({VACUUM})")


def downgrade() -> None:
    for table in HOT_TABLES:
        op.execute(f"ALTER TABLE {table} RESET ({VACUUM_KEYS})")
    op.drop_index("ix_runs_finished_at_settled", table_name="runs")
