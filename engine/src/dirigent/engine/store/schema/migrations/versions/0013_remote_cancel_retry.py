"""The remote-cancel outbox retries: a told-or-not mark becomes a lease with a try count.

Before, taking an owed cancel marked it told at once, so a cancel that failed (the cluster
did not answer, the connection could not be opened) or a process that died between taking
and telling left a remote job running with nobody owing it a cancel. Now taking sets a due
time (the lease, doubling per try) and counts the try; only a cancel the remote accepted, or
the last allowed try, sets ``remote_cancelled_at``. The owed index keeps its predicate.

Revision ID: 0013_remote_cancel_retry
Revises: 0012_attempt_index_prefix
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0013_remote_cancel_retry"
down_revision: str | None = "0012_attempt_index_prefix"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "step_attempts",
        sa.Column("remote_cancel_tries", sa.Integer(), server_default=sa.text("0"), nullable=False),
    )
    op.add_column(
        "step_attempts",
        sa.Column("remote_cancel_due_at", postgresql.TIMESTAMP(timezone=True), nullable=True),
    )


def downgrade() -> None:
    op.drop_column("step_attempts", "remote_cancel_due_at")
    op.drop_column("step_attempts", "remote_cancel_tries")
