"""History rows without a foreign key to their run; a statement trigger deletes them with it.

Engine events, log lines and artifact references are append-only and written on every
transition (about four events, one or two log lines and an artifact per attempt). Each row's
key to ``runs`` was checked by a row trigger of its own: a lookup and a ``FOR KEY SHARE``
lock of the run for every row, the most frequent statement the server ran under load (9.5
per attempt in ``bench/engine_throughput.py``), and, when several workers count one
fan-out's items at once, a multixact on the run's row. These rows are written only for a
live run, by the engine, in the transaction that holds its work, so the keys never caught
anything; they were there for the cascade. The cascade is now one statement per
``DELETE FROM runs`` (retention's batch, a pipeline's deletion) that removes the deleted
runs' history together, instead of one delete per run and table.

Revision ID: 0016_history_without_run_keys
Revises: 0015_running_fan_outs
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0016_history_without_run_keys"
down_revision: str | None = "0015_running_fan_outs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# (table, foreign key) pairs whose rows the trigger deletes instead.
_KEYS = (
    ("engine_events", "fk_engine_events_run_id_runs", "runs", "run_id"),
    ("log_entries", "fk_log_entries_run_id_runs", "runs", "run_id"),
    ("artifact_refs", "fk_artifact_refs_run_id_runs", "runs", "run_id"),
    ("artifact_refs", "fk_artifact_refs_attempt_id_step_attempts", "step_attempts", "attempt_id"),
)

_FUNCTION = """CREATE FUNCTION dirigent_run_history_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM engine_events e USING old_rows o WHERE e.run_id = o.id;
  DELETE FROM log_entries l USING old_rows o WHERE l.run_id = o.id;
  DELETE FROM artifact_refs a USING old_rows o WHERE a.run_id = o.id;
  RETURN NULL;
END $$"""

_TRIGGER = """CREATE TRIGGER runs_history_delete AFTER DELETE ON runs
  REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION dirigent_run_history_deleted()"""


def upgrade() -> None:
    for table, name, _, _ in _KEYS:
        op.drop_constraint(name, table, type_="foreignkey")
    op.execute(_FUNCTION)
    op.execute(_TRIGGER)


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS runs_history_delete ON runs")
    op.execute("DROP FUNCTION IF EXISTS dirigent_run_history_deleted()")
    for table, name, referred, column in _KEYS:
        op.execute(
            f"DELETE FROM {table} t WHERE t.{column} IS NOT NULL AND NOT EXISTS "
            f"(SELECT 1 FROM {referred} r WHERE r.id = t.{column})"
        )
        op.create_foreign_key(name, table, referred, [column], ["id"], ondelete="CASCADE")
