"""Attempts per step as a counter on ``run_steps``, so run detail never counts attempts.

Run detail folds each step from its ``run_steps`` row; the item counters were already
there, but the attempts were counted over ``step_attempts`` on every read (10,000 rows for
a 10,000-item fan-out). A statement-level trigger keeps ``run_steps.attempts`` instead: every
statement that inserts attempts — a run's first attempts, a retry, a manual retry, items
started — adds what it inserted to its step's row, in the same transaction, so the counter
can never disagree with the rows. Attempts are never deleted but with their run (CASCADE
from ``runs`` deletes the ``run_steps`` row too), so there is no delete side to keep.

Existing rows are filled from a count once.

Revision ID: 0011_run_step_attempts
Revises: 0010_alert_events
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_run_step_attempts"
down_revision: str | None = "0010_alert_events"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FUNCTION = """CREATE FUNCTION dirigent_count_attempts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE run_steps s SET attempts = s.attempts + n.n
  FROM (SELECT run_id, step, count(*) AS n FROM new_rows GROUP BY run_id, step) n
  WHERE s.run_id = n.run_id AND s.step = n.step;
  RETURN NULL;
END $$"""

_TRIGGER = """CREATE TRIGGER step_attempts_count_insert AFTER INSERT ON step_attempts
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION dirigent_count_attempts()"""


def upgrade() -> None:
    op.add_column(
        "run_steps",
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
    )
    op.execute(
        """UPDATE run_steps s SET attempts = c.n
           FROM (SELECT run_id, step, count(*) AS n FROM step_attempts GROUP BY run_id, step) c
           WHERE s.run_id = c.run_id AND s.step = c.step"""
    )
    op.execute(_FUNCTION)
    op.execute(_TRIGGER)


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS step_attempts_count_insert ON step_attempts")
    op.execute("DROP FUNCTION IF EXISTS dirigent_count_attempts()")
    op.drop_column("run_steps", "attempts")
