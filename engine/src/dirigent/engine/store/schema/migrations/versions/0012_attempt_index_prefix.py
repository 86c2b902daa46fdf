"""Drop ``ix_step_attempts_run_id_step``: the unique key (run_id, step, item_index, number)
already begins with those columns and serves every lookup by run, or by run and step.

An attempt changes status twice on the hot path (claimed, settled), and a status change is
never a HOT update (``status`` is in the partial indexes' predicates), so each one inserts
into every index of the table: one index fewer is two index insertions fewer per attempt.

Revision ID: 0012_attempt_index_prefix
Revises: 0011_run_step_attempts
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0012_attempt_index_prefix"
down_revision: str | None = "0011_run_step_attempts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index("ix_step_attempts_run_id_step", table_name="step_attempts")


def downgrade() -> None:
    op.create_index("ix_step_attempts_run_id_step", "step_attempts", ["run_id", "step"])
