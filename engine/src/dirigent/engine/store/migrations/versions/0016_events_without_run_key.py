"""Engine events without a foreign key to their run; a statement trigger deletes them with it.

Every transition writes an event (an attempt's about three, its step's and run's more), and
each event row's key to ``runs`` was checked by a row trigger of its own: a lookup and a
``FOR KEY SHARE`` lock of the run for every row, the most frequent statement the server ran
under load (9.5 per attempt in ``bench/engine_throughput.py``). Events are written only by
the triggers of migration 0004, from rows of a live run, so the key never caught anything;
it was there for the cascade. The cascade is now one statement per ``DELETE FROM runs``
(retention's batch, a pipeline's deletion) that removes the deleted runs' events together,
instead of one delete per run.

Revision ID: 0016_events_without_run_key
Revises: 0015_running_fan_outs
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0016_events_without_run_key"
down_revision: str | None = "0015_running_fan_outs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FUNCTION = """CREATE FUNCTION dirigent_run_events_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM engine_events e USING old_rows o WHERE e.run_id = o.id;
  RETURN NULL;
END $$"""

_TRIGGER = """CREATE TRIGGER runs_events_delete AFTER DELETE ON runs
  REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION dirigent_run_events_deleted()"""


def upgrade() -> None:
    op.drop_constraint("fk_engine_events_run_id_runs", "engine_events", type_="foreignkey")
    op.execute(_FUNCTION)
    op.execute(_TRIGGER)


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS runs_events_delete ON runs")
    op.execute("DROP FUNCTION IF EXISTS dirigent_run_events_deleted()")
    op.execute("DELETE FROM engine_events e WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = e.run_id)")
    op.create_foreign_key(
        "fk_engine_events_run_id_runs",
        "engine_events",
        "runs",
        ["run_id"],
        ["id"],
        ondelete="CASCADE",
    )
