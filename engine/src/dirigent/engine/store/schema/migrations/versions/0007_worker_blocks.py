"""Workers say which blocks they can run, so an attempt a worker cannot run is released to
one that can, and fails only when no live worker can take it.

Revision ID: 0007_worker_blocks
Revises: 0006_triggers
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0007_worker_blocks"
down_revision: str | None = "0006_triggers"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "workers",
        sa.Column(
            "blocks",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'[]'::jsonb"),
            nullable=False,
        ),
    )


def downgrade() -> None:
    op.drop_column("workers", "blocks")
