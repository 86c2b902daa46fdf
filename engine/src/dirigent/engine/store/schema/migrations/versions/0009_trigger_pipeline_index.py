"""Schedules and webhooks indexed by the pipeline they start, so the pipeline listing counts
each row's triggers from an index rather than from every trigger of the namespace.

Revision ID: 0009_trigger_pipeline_index
Revises: 0008_hot_set
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0009_trigger_pipeline_index"
down_revision: str | None = "0008_hot_set"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_schedules_namespace_pipeline", "schedules", ["namespace", "pipeline"])
    op.create_index("ix_webhooks_namespace_pipeline", "webhooks", ["namespace", "pipeline"])


def downgrade() -> None:
    op.drop_index("ix_webhooks_namespace_pipeline", table_name="webhooks")
    op.drop_index("ix_schedules_namespace_pipeline", table_name="schedules")
