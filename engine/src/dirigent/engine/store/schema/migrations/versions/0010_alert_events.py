"""Alert outcomes as engine events: a notification delivered or given up is a transition the
run's subscribers see (entity ``notification``), so the operator can raise a Kubernetes Event
on the Pipeline when an alert could not be delivered.

Like the run, step and attempt events (0004), a statement-level trigger writes them in the
transaction that settles the notification; only the terminal statuses are recorded (queued
and running are the delivery's own churn), and each NOTIFYs the subscribers.

Revision ID: 0010_alert_events
Revises: 0009_trigger_pipeline_index
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0010_alert_events"
down_revision: str | None = "0009_trigger_pipeline_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CHECK = "ck_engine_events_entity"

_FUNCTION = """CREATE FUNCTION dirigent_notification_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO engine_events (namespace, run_id, entity, entity_id, status, previous)
  SELECT r.namespace, n.run_id, 'notification', n.id, n.status, o.status
  FROM new_rows n JOIN old_rows o ON o.id = n.id JOIN runs r ON r.id = n.run_id
  WHERE n.status IS DISTINCT FROM o.status AND n.status IN ('delivered', 'failed');
  IF FOUND THEN PERFORM pg_notify('dirigent_events', ''); END IF;
  RETURN NULL;
END $$"""

_TRIGGER = """CREATE TRIGGER notifications_events_update AFTER UPDATE ON notifications
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION dirigent_notification_events()"""


def _entities(values: str) -> None:
    op.drop_constraint(op.f(_CHECK), "engine_events", type_="check")
    op.create_check_constraint(op.f(_CHECK), "engine_events", f"entity IN ({values})")


def upgrade() -> None:
    _entities("'run', 'step', 'attempt', 'notification'")
    op.execute(_FUNCTION)
    op.execute(_TRIGGER)


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS notifications_events_update ON notifications")
    op.execute("DROP FUNCTION IF EXISTS dirigent_notification_events()")
    op.execute("DELETE FROM engine_events WHERE entity = 'notification'")
    _entities("'run', 'step', 'attempt'")
