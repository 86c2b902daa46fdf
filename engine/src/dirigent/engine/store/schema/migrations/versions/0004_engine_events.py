"""Engine events: run, step and attempt transitions recorded by triggers, in the same transaction.

Statement-level triggers with transition tables write one ``INSERT ... SELECT`` per statement,
so a batch that moves 500 attempts costs one extra statement, not 500. Run and step
transitions also ``NOTIFY dirigent_events`` (PostgreSQL folds duplicates per transaction);
attempt transitions do not, because a NOTIFY serialises commits and attempts are the hot
path: subscribers see them on their next poll or with the next run or step transition.

Revision ID: 0004_engine_events
Revises: 0003_stuck_runs
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from dirigent.engine.store.schema.tables import Xid8

revision: str = "0004_engine_events"
down_revision: str | None = "0003_stuck_runs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FUNCTIONS = """CREATE FUNCTION dirigent_run_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO engine_events (namespace, run_id, entity, entity_id, status)
    SELECT n.namespace, n.id, 'run', n.id, n.status FROM new_rows n;
  ELSE
    INSERT INTO engine_events (namespace, run_id, entity, entity_id, status, previous)
    SELECT n.namespace, n.id, 'run', n.id, n.status, o.status
    FROM new_rows n JOIN old_rows o ON o.id = n.id
    WHERE n.status IS DISTINCT FROM o.status;
  END IF;
  IF FOUND THEN PERFORM pg_notify('dirigent_events', ''); END IF;
  RETURN NULL;
END $$;

CREATE FUNCTION dirigent_step_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO engine_events (namespace, run_id, entity, entity_id, step, status, previous)
  SELECT r.namespace, n.run_id, 'step', n.id, n.step, n.status, o.status
  FROM new_rows n JOIN old_rows o ON o.id = n.id JOIN runs r ON r.id = n.run_id
  WHERE n.status IS DISTINCT FROM o.status;
  IF FOUND THEN PERFORM pg_notify('dirigent_events', ''); END IF;
  RETURN NULL;
END $$;

CREATE FUNCTION dirigent_attempt_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO engine_events
    (namespace, run_id, entity, entity_id, step, item_index, number, status, previous)
  SELECT r.namespace, n.run_id, 'attempt', n.id, n.step, n.item_index, n.number, n.status,
         o.status
  FROM new_rows n JOIN old_rows o ON o.id = n.id JOIN runs r ON r.id = n.run_id
  WHERE n.status IS DISTINCT FROM o.status AND n.status NOT IN ('pending', 'queued');
  RETURN NULL;
END $$;

CREATE TRIGGER runs_events_insert AFTER INSERT ON runs
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION dirigent_run_events();

CREATE TRIGGER runs_events_update AFTER UPDATE ON runs
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION dirigent_run_events();

CREATE TRIGGER run_steps_events_update AFTER UPDATE ON run_steps
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION dirigent_step_events();

CREATE TRIGGER step_attempts_events_update AFTER UPDATE ON step_attempts
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION dirigent_attempt_events();
"""

_DROP = """
DROP TRIGGER IF EXISTS step_attempts_events_update ON step_attempts;
DROP TRIGGER IF EXISTS run_steps_events_update ON run_steps;
DROP TRIGGER IF EXISTS runs_events_update ON runs;
DROP TRIGGER IF EXISTS runs_events_insert ON runs;
DROP FUNCTION IF EXISTS dirigent_attempt_events();
DROP FUNCTION IF EXISTS dirigent_step_events();
DROP FUNCTION IF EXISTS dirigent_run_events();
"""


def upgrade() -> None:
    op.create_table(
        "engine_events",
        sa.Column("id", sa.BigInteger(), sa.Identity(), nullable=False),
        sa.Column("xid", Xid8(), server_default=sa.text("pg_current_xact_id()"), nullable=False),
        sa.Column(
            "at", postgresql.TIMESTAMP(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.Column("namespace", sa.Text(), nullable=False),
        sa.Column("run_id", sa.BigInteger(), nullable=False),
        sa.Column("entity", sa.String(length=32), nullable=False),
        sa.Column("entity_id", sa.BigInteger(), nullable=False),
        sa.Column("step", sa.Text(), nullable=True),
        sa.Column("item_index", sa.Integer(), nullable=True),
        sa.Column("number", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("previous", sa.String(length=32), nullable=True),
        sa.CheckConstraint(
            "entity IN ('run', 'step', 'attempt')", name=op.f("ck_engine_events_entity")
        ),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.id"],
            name=op.f("fk_engine_events_run_id_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_engine_events")),
    )
    op.create_index("ix_engine_events_xid_id", "engine_events", ["xid", "id"])
    op.create_index("ix_engine_events_run_id_xid_id", "engine_events", ["run_id", "xid", "id"])
    # One statement per execute: asyncpg prepares each, and a prepared statement holds one.
    for statement in _FUNCTIONS.split("\n\n"):
        op.execute(statement)


def downgrade() -> None:
    for statement in _DROP.strip().splitlines():
        op.execute(statement)
    op.drop_table("engine_events")
