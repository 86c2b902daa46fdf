"""Table definitions: the schema the engine's explicit SQL is written against.

SQLAlchemy Core rather than ORM because the runtime's hot paths (claims, outcomes, readiness)
are hand-written statements; the tables exist to name columns, not to map objects. This module
is the single source of the schema: the baseline migration creates exactly these tables, and a
test compares a migrated database against `metadata`.

Conventions: ids are BIGINT identity keys (`workers.id` excepted: a worker names itself),
every timestamp is timestamptz, JSON is JSONB, and enums are VARCHAR with a CHECK listing the
values, so adding a value is a constraint swap and never an enum-type migration.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from sqlalchemy import (
    CHAR,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Double,
    ForeignKey,
    Identity,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, TIMESTAMP
from sqlalchemy.types import UserDefinedType

from dirigent.engine.shapes.manifests.enums import Priority
from dirigent.engine.shapes.statuses import RunStatus, WorkStatus

# Deterministic constraint names: migrations can drop or alter them by name later, and
# autogenerate comparisons do not depend on server-chosen names.
NAMING_CONVENTION: Final[dict[str, str]] = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)

# Enum value sets, exported so the store's queries and tests use the same literals.
IMPORTANCE: Final = ("routine", "normal", "critical")
DELETION_POLICY: Final = ("retain", "delete")
RUN_STATUS: Final = tuple(RunStatus)
RUN_TERMINAL_STATUS: Final = tuple(s for s in RunStatus if s.terminal)
TRIGGER_KIND: Final = ("manual", "api", "schedule", "webhook", "backfill", "pipeline", "cli")
WORK_STATUS: Final = tuple(WorkStatus)
ATTEMPT_KIND: Final = ("automatic", "manual")
LOG_LEVEL: Final = ("debug", "info", "warning", "error")
WORKER_STATUS: Final = ("active", "gone", "stopped")
# The artifact name a run's rendered markdown report is stored under (written by the alerts
# transactions, read by the run queries).
REPORT_ARTIFACT: Final = "report"

# Priority is a small integer so the claim can ORDER BY it directly.
PRIORITY_LOW: Final = Priority.LOW.rank
PRIORITY_NORMAL: Final = Priority.NORMAL.rank
PRIORITY_HIGH: Final = Priority.HIGH.rank


def _ts(name: str, *, nullable: bool = True, now: bool = False) -> Column[Any]:
    return Column(
        name,
        TIMESTAMP(timezone=True),
        nullable=nullable,
        server_default=text("now()") if now else None,
    )


def _id() -> Column[int]:
    return Column("id", BigInteger, Identity(), primary_key=True)


def _jsonb(name: str, *, nullable: bool = True, default: str | None = None) -> Column[Any]:
    return Column(
        name,
        JSONB,
        nullable=nullable,
        server_default=text(f"'{default}'::jsonb") if default is not None else None,
    )


def _enum(
    name: str, values: Sequence[str], *, default: str | None = None, nullable: bool = False
) -> tuple[Column[str], CheckConstraint]:
    """A VARCHAR column and the CHECK constraint that limits it to `values`."""
    assert all(len(v) <= 32 for v in values)
    listed = ", ".join(f"'{v}'" for v in values)
    column: Column[str] = Column(
        name,
        # Room to grow: a longer value later is a CHECK swap, not a type change.
        String(32),
        nullable=nullable,
        server_default=text(f"'{default}'") if default is not None else None,
    )
    return column, CheckConstraint(f"{name} IN ({listed})", name=name)


def _priority() -> tuple[Column[int], CheckConstraint]:
    column: Column[int] = Column(
        "priority", SmallInteger, nullable=False, server_default=text(str(PRIORITY_NORMAL))
    )
    return column, CheckConstraint(
        f"priority BETWEEN {PRIORITY_LOW} AND {PRIORITY_HIGH}", name="priority"
    )


pipelines = Table(
    "pipelines",
    metadata,
    _id(),
    Column("namespace", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("active", Boolean, nullable=False, server_default=text("true")),
    # use_alter: pipelines and pipeline_versions reference each other; the constraint is
    # added after both tables exist.
    Column(
        "current_version_id",
        BigInteger,
        ForeignKey("pipeline_versions.id", use_alter=True, ondelete="SET NULL"),
        nullable=True,
    ),
    *_enum("importance", IMPORTANCE, default="normal"),
    *_enum("deletion_policy", DELETION_POLICY, default="retain"),
    Column("owner_uid", Text, nullable=True),
    _ts("created_at", nullable=False, now=True),
    _ts("updated_at", nullable=False, now=True),
    UniqueConstraint("namespace", "name"),
)

pipeline_versions = Table(
    "pipeline_versions",
    metadata,
    _id(),
    Column(
        "pipeline_id",
        BigInteger,
        ForeignKey("pipelines.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("number", Integer, nullable=False),
    Column("digest", CHAR(64), nullable=False),
    _jsonb("document", nullable=False),
    _jsonb("provenance", nullable=False, default="{}"),
    _ts("created_at", nullable=False, now=True),
    UniqueConstraint("pipeline_id", "number"),
)

connections = Table(
    "connections",
    metadata,
    _id(),
    Column("namespace", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("type", Text, nullable=False),
    _jsonb("settings", nullable=False, default="{}"),
    # field -> base64 AES-GCM sealed value (see store.crypto); never plaintext.
    _jsonb("secrets", nullable=False, default="{}"),
    Column("digest", CHAR(64), nullable=False),
    Column("owner_uid", Text, nullable=True),
    _ts("created_at", nullable=False, now=True),
    _ts("updated_at", nullable=False, now=True),
    _ts("last_check_at"),
    Column("last_check_ok", Boolean, nullable=True),
    Column("last_check_message", Text, nullable=True),
    UniqueConstraint("namespace", "name"),
)

runs = Table(
    "runs",
    metadata,
    _id(),
    Column("namespace", Text, nullable=False),
    # Cascade so a pipeline deleted with deletionPolicy Delete takes its history with it;
    # version_id keeps NO ACTION so a version pinned by a run cannot be deleted on its own.
    Column(
        "pipeline_id",
        BigInteger,
        ForeignKey("pipelines.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("version_id", BigInteger, ForeignKey("pipeline_versions.id"), nullable=False),
    *_enum("status", RUN_STATUS, default="queued"),
    _jsonb("params", nullable=False, default="{}"),
    *_priority(),
    _jsonb("requires_workers", nullable=False, default="[]"),
    *_enum("triggered_by_kind", TRIGGER_KIND),
    Column("triggered_by_ref", Text, nullable=True),
    Column(
        "parent_run_id",
        BigInteger,
        ForeignKey("runs.id", ondelete="SET NULL"),
        nullable=True,
    ),
    # Half-open [window_start, window_end): the logical interval the run covers.
    _ts("window_start"),
    _ts("window_end"),
    _ts("created_at", nullable=False, now=True),
    _ts("started_at"),
    _ts("finished_at"),
    _ts("last_progress_at"),
    Column("error_message", Text, nullable=True),
    Column("failed_step", Text, nullable=True),
    Column("idempotency_key", Text, nullable=True),
    # How many attempts of this run have been queued so far: the next queued attempt's
    # fair_seq. Written only under the run-row lock the outcome transaction takes.
    Column("queued_seq", BigInteger, nullable=False, server_default=text("0")),
    # Set by the sweeper when a running run made no progress for `stuck_run`; cleared by the
    # next outcome. Detection happens once per episode, not once per sweep.
    _ts("stuck_at"),
    Index("ix_runs_pipeline_id_status", "pipeline_id", "status"),
    Index(
        "ix_runs_status_in_flight",
        "status",
        postgresql_where=text("status IN ('queued', 'running')"),
    ),
    # Retention takes its oldest finished runs one batch at a time (0008_hot_set, 0017).
    Index(
        "ix_runs_finished_at_terminal",
        "finished_at",
        postgresql_where=text(
            "status IN ('succeeded', 'completed_with_errors', 'failed', 'cancelled')"
        ),
    ),
    Index(
        "ix_runs_parent_run_id",
        "parent_run_id",
        postgresql_where=text("parent_run_id IS NOT NULL"),
    ),
    # A client retrying "start a run" with the same key gets the run it already created.
    Index(
        "uq_runs_pipeline_id_idempotency_key",
        "pipeline_id",
        "idempotency_key",
        unique=True,
        postgresql_where=text("idempotency_key IS NOT NULL"),
    ),
)

run_items = Table(
    "run_items",
    metadata,
    _id(),
    Column("run_id", BigInteger, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("step", Text, nullable=False),
    Column("index", Integer, nullable=False),
    _jsonb("value", nullable=True),
    *_enum("status", WORK_STATUS, default="pending"),
    Column("error_message", Text, nullable=True),
    _ts("created_at", nullable=False, now=True),
    _ts("finished_at"),
    UniqueConstraint("run_id", "step", "index"),
)

step_attempts = Table(
    "step_attempts",
    metadata,
    _id(),
    Column("run_id", BigInteger, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column(
        "run_item_id",
        BigInteger,
        ForeignKey("run_items.id", ondelete="CASCADE"),
        nullable=True,
    ),
    Column("step", Text, nullable=False),
    Column("item_index", Integer, nullable=True),
    Column("number", Integer, nullable=False),
    *_enum("kind", ATTEMPT_KIND, default="automatic"),
    *_enum("status", WORK_STATUS, default="pending"),
    *_priority(),
    _jsonb("requires_workers", nullable=False, default="[]"),
    Column("block", Text, nullable=False),
    _ts("available_at"),
    _ts("next_poll_at"),
    Column("lease_owner", Text, nullable=True),
    _ts("lease_expires_at"),
    _jsonb("input"),
    _jsonb("output"),
    _jsonb("handle"),
    _jsonb("fetched"),
    _jsonb("cursor"),
    Column("wait_message", Text, nullable=True),
    Column("wait_progress", Double, nullable=True),
    Column("gone_count", Integer, nullable=False, server_default=text("0")),
    # Consecutive probe or fetch errors: the handle is kept and probed again until a budget.
    Column("probe_errors", Integer, nullable=False, server_default=text("0")),
    # Expired leases recovered for this attempt: past a bound it fails instead of looping.
    Column("recoveries", Integer, nullable=False, server_default=text("0")),
    # When the remote of a cancelled attempt holding a handle was told to stop; NULL while
    # that is still owed (the sweeper's outbox).
    _ts("remote_cancelled_at"),
    # The outbox's lease: tries so far, and when an unanswered try may be taken again.
    Column("remote_cancel_tries", Integer, nullable=False, server_default=text("0")),
    _ts("remote_cancel_due_at"),
    Column("error_class", Text, nullable=True),
    Column("error_code", Text, nullable=True),
    Column("error_message", Text, nullable=True),
    _jsonb("error_params"),
    Column("idempotency_key", Text, nullable=True),
    # Round-robin fairness between runs: the attempt's position among its run's queued work.
    Column("fair_seq", BigInteger, nullable=False, server_default=text("0")),
    _ts("created_at", nullable=False, now=True),
    _ts("first_started_at"),
    _ts("started_at"),
    _ts("finished_at"),
    CheckConstraint("number >= 1", name="number_positive"),
    # One attempt per number per (step, item); NULLS NOT DISTINCT so steps without fan-out
    # (item_index NULL) are covered too (PostgreSQL 15+).
    UniqueConstraint("run_id", "step", "item_index", "number", postgresql_nulls_not_distinct=True),
    # The claim's order: priority, then fairness between runs, then due time, then id.
    Index(
        "ix_step_attempts_claim_queued",
        text("priority DESC"),
        "fair_seq",
        "available_at",
        "id",
        postgresql_where=text("status = 'queued'"),
    ),
    Index(
        "ix_step_attempts_next_poll_at_waiting",
        "next_poll_at",
        postgresql_where=text("status = 'waiting'"),
    ),
    # No index on (run_id, step): the unique key above begins with them (migration 0012).
    Index(
        "ix_step_attempts_lease_expires_at_running",
        "lease_expires_at",
        postgresql_where=text("status = 'running'"),
    ),
    # Without it, cascading a run_items delete scans step_attempts once per item.
    Index(
        "ix_step_attempts_run_item_id",
        "run_item_id",
        postgresql_where=text("run_item_id IS NOT NULL"),
    ),
    # A manual retry's key is per run: one attempt per item under it.
    Index(
        "uq_step_attempts_run_id_idempotency_key",
        "run_id",
        "idempotency_key",
        "item_index",
        unique=True,
        postgresql_where=text("idempotency_key IS NOT NULL"),
        postgresql_nulls_not_distinct=True,
    ),
    # The outbox of remote jobs still to be told to cancel.
    Index(
        "ix_step_attempts_remote_cancel_owed",
        "id",
        postgresql_where=text(
            "status = 'cancelled' AND handle IS NOT NULL AND remote_cancelled_at IS NULL"
        ),
    ),
)

# History (artifact_refs, log_entries, engine_events) has no foreign keys (0016): checking
# them cost a lookup and a lock of the run for every row written; a statement trigger on
# runs deletes a deleted run's history instead.
artifact_refs = Table(
    "artifact_refs",
    metadata,
    _id(),
    Column("run_id", BigInteger, nullable=False),
    Column("attempt_id", BigInteger, nullable=True),
    Column("name", Text, nullable=False),
    Column("content_type", Text, nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("digest", CHAR(64), nullable=False),
    # Exactly one of inline (small values) or uri (storage backend) holds the content.
    _jsonb("inline"),
    Column("uri", Text, nullable=True),
    _ts("created_at", nullable=False, now=True),
    CheckConstraint("(inline IS NULL) <> (uri IS NULL)", name="inline_xor_uri"),
    Index("ix_artifact_refs_run_id", "run_id"),
    Index(
        "ix_artifact_refs_attempt_id",
        "attempt_id",
        postgresql_where=text("attempt_id IS NOT NULL"),
    ),
)

log_entries = Table(
    "log_entries",
    metadata,
    _id(),
    # No foreign keys: logs are append-only and high-volume (see artifact_refs).
    Column("run_id", BigInteger, nullable=False),
    Column("attempt_id", BigInteger, nullable=True),
    Column("run_item_id", BigInteger, nullable=True),
    Column("step", Text, nullable=True),
    *_enum("level", LOG_LEVEL, default="info"),
    Column("message", Text, nullable=False),
    _jsonb("fields", nullable=False, default="{}"),
    _ts("created_at", nullable=False, now=True),
    Index("ix_log_entries_run_id_id", "run_id", "id"),
)

workers = Table(
    "workers",
    metadata,
    Column("id", Text, primary_key=True),
    Column("hostname", Text, nullable=False),
    Column("version", Text, nullable=False),
    _jsonb("plugins", nullable=False, default="[]"),
    _jsonb("tags", nullable=False, default="[]"),
    # The block ids this worker can run (installed, and allowed when unsafe).
    _jsonb("blocks", nullable=False, default="[]"),
    Column("concurrency", Integer, nullable=False),
    _ts("started_at", nullable=False, now=True),
    _ts("last_seen_at", nullable=False, now=True),
    *_enum("status", WORKER_STATUS, default="active"),
)

# One row per (run, step): the step's own state, so readiness is decided over a handful of
# rows rather than over every attempt of a 10,000-item fan-out.
run_steps = Table(
    "run_steps",
    metadata,
    _id(),
    Column("run_id", BigInteger, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("step", Text, nullable=False),
    *_enum("status", WORK_STATUS, default="pending"),
    # NULL when the step has no forEach; else the size of its grid.
    Column("items", Integer, nullable=True),
    Column("items_succeeded", Integer, nullable=False, server_default=text("0")),
    Column("items_failed", Integer, nullable=False, server_default=text("0")),
    Column("items_skipped", Integer, nullable=False, server_default=text("0")),
    Column("items_cancelled", Integer, nullable=False, server_default=text("0")),
    # Attempts made of the step, every item and retry; kept by a trigger on step_attempts
    # inserts (0011), so run detail reads it instead of counting.
    Column("attempts", Integer, nullable=False, server_default=text("0")),
    # Succeeded, but some items failed under onItemFailure: Continue.
    Column("with_errors", Boolean, nullable=False, server_default=text("false")),
    _ts("started_at"),
    _ts("finished_at"),
    UniqueConstraint("run_id", "step"),
    # Running fan-outs only: where the sweeper looks for a step its counters end (0015).
    Index(
        "ix_run_steps_running_fan_outs",
        "run_id",
        postgresql_where=text("status = 'running' AND items IS NOT NULL"),
    ),
)


class Xid8(UserDefinedType[int]):
    """PostgreSQL's 64-bit transaction id: orders events by the transaction that wrote them."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        return "XID8"


EVENT_ENTITY: Final = ("run", "step", "attempt", "notification")

# Transitions of runs, steps and attempts (migration 0004) and finished notifications (0010),
# written by statement-level triggers in the same transaction as the change, so a transition
# and its event commit together.
# Readers page by (xid, id) and only below the oldest transaction still open
# (pg_snapshot_xmin): a cursor never skips an event that commits late.
# run_id has no foreign key (see artifact_refs).
engine_events = Table(
    "engine_events",
    metadata,
    _id(),
    Column("xid", Xid8, nullable=False, server_default=text("pg_current_xact_id()")),
    _ts("at", nullable=False, now=True),
    Column("namespace", Text, nullable=False),
    Column("run_id", BigInteger, nullable=False),
    *_enum("entity", EVENT_ENTITY),
    Column("entity_id", BigInteger, nullable=False),
    Column("step", Text, nullable=True),
    Column("item_index", Integer, nullable=True),
    Column("number", Integer, nullable=True),
    Column("status", String(32), nullable=False),
    Column("previous", String(32), nullable=True),
    Index("ix_engine_events_xid_id", "xid", "id"),
    Index("ix_engine_events_run_id_xid_id", "run_id", "xid", "id"),
)

# --- triggers and alerting (migration 0006) --------------------------------------------

FIRING_RESULT: Final = ("fired", "failed")
DELIVERY_RESULT: Final = ("accepted", "refused")
ALERT_EVENT: Final = ("run_failed", "run_completed_with_errors", "run_succeeded", "run_stuck")
NOTIFICATION_STATUS: Final = ("queued", "running", "delivered", "failed")

# A Schedule: its clock fields are columns so a firing computes the next slot without
# parsing the document; next_fire_at is NULL when paused or done (a one-time schedule past
# its instant), and indexed, so a tick is an index range scan rather than a sweep.
schedules = Table(
    "schedules",
    metadata,
    _id(),
    Column("namespace", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("pipeline", Text, nullable=False),
    _jsonb("spec", nullable=False),
    Column("digest", CHAR(64), nullable=False),
    Column("cron", Text, nullable=True),
    Column("interval_ms", BigInteger, nullable=True),
    _ts("at"),
    Column("timezone", Text, nullable=False, server_default=text("'UTC'")),
    _jsonb("params", nullable=False, default="{}"),
    Column("priority", SmallInteger, nullable=True),
    Column("paused", Boolean, nullable=False, server_default=text("false")),
    _ts("next_fire_at"),
    _ts("last_fire_at"),
    Column("last_run_id", BigInteger, ForeignKey("runs.id", ondelete="SET NULL"), nullable=True),
    Column("last_error", Text, nullable=True),
    Column("owner_uid", Text, nullable=True),
    _ts("created_at", nullable=False, now=True),
    _ts("updated_at", nullable=False, now=True),
    UniqueConstraint("namespace", "name"),
    Index("ix_schedules_namespace_pipeline", "namespace", "pipeline"),
    Index(
        "ix_schedules_next_fire_at_due",
        "next_fire_at",
        postgresql_where=text("next_fire_at IS NOT NULL"),
    ),
)

# Every firing, failed ones included (a pin that no longer validates, a concurrency refusal).
schedule_firings = Table(
    "schedule_firings",
    metadata,
    _id(),
    Column(
        "schedule_id",
        BigInteger,
        ForeignKey("schedules.id", ondelete="CASCADE"),
        nullable=False,
    ),
    _ts("scheduled_for", nullable=False),
    _ts("fired_at", nullable=False, now=True),
    *_enum("result", FIRING_RESULT),
    Column("misfire", Boolean, nullable=False, server_default=text("false")),
    Column("run_id", BigInteger, ForeignKey("runs.id", ondelete="SET NULL"), nullable=True),
    Column("message", Text, nullable=True),
    Index("ix_schedule_firings_schedule_id_id", "schedule_id", "id"),
)

# A Webhook: the token is stored only as its SHA-256 (with a short prefix to recognise it),
# the HMAC secret only sealed (store.crypto).
webhooks = Table(
    "webhooks",
    metadata,
    _id(),
    Column("namespace", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("pipeline", Text, nullable=False),
    _jsonb("spec", nullable=False),
    Column("digest", CHAR(64), nullable=False),
    Column("token_hash", CHAR(64), nullable=False),
    Column("token_prefix", Text, nullable=False),
    Column("hmac_secret", Text, nullable=True),
    Column("enabled", Boolean, nullable=False, server_default=text("true")),
    Column("owner_uid", Text, nullable=True),
    _ts("created_at", nullable=False, now=True),
    _ts("updated_at", nullable=False, now=True),
    _ts("last_delivery_at"),
    Column("last_delivery_result", Text, nullable=True),
    UniqueConstraint("namespace", "name"),
    UniqueConstraint("token_hash"),
    Index("ix_webhooks_namespace_pipeline", "namespace", "pipeline"),
)

# Every delivery, refusals included; an unknown token's has no webhook.
webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    _id(),
    Column(
        "webhook_id",
        BigInteger,
        ForeignKey("webhooks.id", ondelete="CASCADE"),
        nullable=True,
    ),
    _ts("received_at", nullable=False, now=True),
    *_enum("result", DELIVERY_RESULT),
    Column("reason", Text, nullable=True),
    Column("status_code", SmallInteger, nullable=False),
    Column("run_id", BigInteger, ForeignKey("runs.id", ondelete="SET NULL"), nullable=True),
    Column("message", Text, nullable=True),
    Column("body_size", Integer, nullable=True),
    Index("ix_webhook_deliveries_webhook_id_id", "webhook_id", "id"),
)

# One queued alert delivery, claimed like an attempt (SKIP LOCKED, a lease, backoff, a
# terminal failed status). Unique on (run, rule, event): a rule says one thing about one run
# once, which is what lets the sweeper re-detect a stuck run and still page exactly once.
notifications = Table(
    "notifications",
    metadata,
    _id(),
    Column("run_id", BigInteger, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column(
        "pipeline_id",
        BigInteger,
        ForeignKey("pipelines.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("rule", Text, nullable=False),
    *_enum("event", ALERT_EVENT),
    Column("notifier", Text, nullable=False),
    Column("connection", Text, nullable=True),
    Column("subject", Text, nullable=False),
    Column("body", Text, nullable=False),
    _jsonb("snapshot", nullable=False, default="{}"),
    *_enum("status", NOTIFICATION_STATUS, default="queued"),
    Column("attempts", Integer, nullable=False, server_default=text("0")),
    Column("max_attempts", Integer, nullable=False),
    _ts("available_at", nullable=False, now=True),
    Column("lease_owner", Text, nullable=True),
    _ts("lease_expires_at"),
    Column("last_error", Text, nullable=True),
    _ts("created_at", nullable=False, now=True),
    _ts("delivered_at"),
    UniqueConstraint("run_id", "rule", "event"),
    Index(
        "ix_notifications_available_at_queued",
        "available_at",
        postgresql_where=text("status = 'queued'"),
    ),
    Index(
        "ix_notifications_lease_expires_at_running",
        "lease_expires_at",
        postgresql_where=text("status = 'running'"),
    ),
    Index("ix_notifications_pipeline_id_rule_created_at", "pipeline_id", "rule", "created_at"),
)
