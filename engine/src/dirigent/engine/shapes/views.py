"""What the engine shows: the read models every door returns, and keyset pages over them.

One model per shape, shared by the REST API (its response bodies), the CLI, the operator's
status and the tests; the store builds them from rows by column name. Pages are keyset
pages — ``{items, next}`` where ``next`` is an opaque cursor — so a page costs the same at
the millionth row as at the first; a cursor a client altered is refused as a problem, not
misread.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dirigent.engine.shapes.problems import Problem, ProblemsError, problem

__all__ = [
    "ArtifactView",
    "AttemptView",
    "BackfillRequest",
    "BackfillResult",
    "BackfillWindow",
    "BlockView",
    "ConnectionView",
    "DeliveryView",
    "EngineEvent",
    "FailureView",
    "FiringView",
    "ItemView",
    "LastRun",
    "LogView",
    "NotificationView",
    "Page",
    "PipelineSummary",
    "PipelineVersionView",
    "RunDetail",
    "RunSummary",
    "ScheduleView",
    "StepDetail",
    "SystemInfo",
    "WebhookView",
    "WorkerView",
    "decode_cursor",
    "decode_key",
    "encode_cursor",
]

T = TypeVar("T")


class _View(BaseModel):
    model_config = ConfigDict(frozen=True, from_attributes=True)


class Page(BaseModel, Generic[T]):
    """One keyset page; ``next`` is None on the last page."""

    items: list[T]
    next: str | None = None


def encode_cursor(*key: Any) -> str:
    """An opaque cursor for a keyset position (JSON of the key, URL-safe base64)."""
    raw = json.dumps(list(key), default=str, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, arity: int) -> list[Any]:
    """The key inside a cursor; a malformed one is the caller's mistake (``page.cursor.invalid``)."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key = json.loads(raw)
    except (binascii.Error, ValueError):
        key = None
    if not isinstance(key, list) or len(key) != arity:
        raise ProblemsError(
            [
                problem(
                    "page.cursor.invalid",
                    "the page cursor is not one this server handed out; start again without it",
                    "cursor",
                )
            ]
        )
    return key


K = TypeVar("K", int, str)


def decode_key(cursor: str | None, kind: type[K]) -> K | None:
    """The one key inside a cursor (a row id or a name; None without a cursor), refused like
    any cursor this server never handed out when it is not of ``kind``."""
    if not cursor:
        return None
    [key] = decode_cursor(cursor, 1)
    if type(key) is not kind:
        decode_cursor("", 1)  # raises page.cursor.invalid
    found: K = key
    return found


class LastRun(_View):
    id: int
    status: str
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    failed_step: str | None = None
    error_message: str | None = None


class PipelineSummary(_View):
    """A row of the pipeline listing: what is it, is it active, how are its runs doing."""

    namespace: str
    name: str
    title: str | None = None
    active: bool
    version: int | None = None
    digest: str | None = None
    updated_at: datetime
    runs_in_flight: int = 0
    schedules: int = 0
    webhooks: int = 0
    last_run: LastRun | None = None


class RunSummary(_View):
    id: int
    namespace: str
    pipeline: str
    version: int
    status: str
    triggered_by_kind: str
    triggered_by_ref: str | None = None
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    failed_step: str | None = None
    error_message: str | None = None
    window_start: datetime | None = None
    window_end: datetime | None = None


class StepDetail(_View):
    """One node of the run's DAG view, folded from counters and grouped counts."""

    step: str
    block: str
    depends_on: list[str] = Field(default_factory=list)
    status: str
    skip_reason: str | None = None
    items: int | None = None
    items_by_status: dict[str, int] = Field(
        default_factory=dict,
        description="A fan-out's items by status, zeros left out; items not finished yet "
        "(waiting for or in an attempt) count as pending",
    )
    attempts: int = 0
    with_errors: bool = False
    started_at: datetime | None = None
    finished_at: datetime | None = None
    duration_seconds: float | None = None


class RunDetail(RunSummary):
    params: dict[str, Any] = Field(default_factory=dict)
    parent_run_id: int | None = None
    steps: list[StepDetail] = Field(default_factory=list)


class ItemView(_View):
    id: int
    step: str
    index: int
    status: str
    value: Any = None
    error_message: str | None = None
    created_at: datetime | None = None
    finished_at: datetime | None = None


class AttemptView(_View):
    id: int
    step: str
    item_index: int | None = None
    number: int
    kind: str
    status: str
    block: str
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    wait_message: str | None = None
    wait_progress: float | None = None
    error_class: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    output: Any = None


class FailureView(_View):
    """The last failed attempt of a failed step or item: what a diagnosis prints."""

    step: str
    block: str
    number: int
    item_index: int | None = None
    error_class: str | None = None
    error_code: str | None = None
    error_message: str | None = None


class LogView(_View):
    id: int
    attempt_id: int | None = None
    step: str | None = None
    level: str
    message: str
    fields: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime


class EngineEvent(_View):
    """A run, step or attempt transition; ``cursor`` resumes a subscription just after it."""

    cursor: str
    at: datetime
    namespace: str
    run_id: int
    entity: str
    entity_id: int
    step: str | None = None
    item_index: int | None = None
    number: int | None = None
    status: str
    previous: str | None = None


# --- Views added for the REST API (issue 12) ---------------------------------------------


class PipelineVersionView(_View):
    """One immutable version of a pipeline: its number, digest, and who applied it how."""

    number: int
    digest: str
    created_at: datetime
    provenance: dict[str, Any] = Field(default_factory=dict)


class ConnectionView(_View):
    """A connection as every door shows it: settings in the clear, secrets only by name.

    Secret values never leave the engine except to a worker opening the connection for a
    step; this view has no field that could carry one.
    """

    namespace: str
    name: str
    type: str
    settings: dict[str, Any] = Field(default_factory=dict)
    secret_fields: list[str] = Field(default_factory=list)
    created_at: datetime
    updated_at: datetime
    last_check_at: datetime | None = None
    last_check_ok: bool | None = None
    last_check_message: str | None = None


class WorkerView(_View):
    id: str
    hostname: str
    version: str
    status: str
    plugins: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    concurrency: int
    started_at: datetime
    last_seen_at: datetime


class ArtifactView(_View):
    """What a run wrote down: metadata only; the content is read separately."""

    id: int
    run_id: int
    attempt_id: int | None = None
    step: str | None = None
    name: str
    content_type: str
    size: int
    digest: str
    stored: str = Field(description="inline (kept in the database) or uri (in storage)")
    created_at: datetime


class BlockView(_View):
    """One installed block with its published schemas: what a form or a validator reads."""

    id: str
    kind: str
    plugin: str
    group: str = ""
    summary: str = ""
    description: str = ""
    local_execution: bool = False
    connection_fields: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Config fields that name a connection -> the kinds each takes (empty: any).",
    )
    config_schema: dict[str, Any] = Field(default_factory=dict)
    output_schema: dict[str, Any] = Field(default_factory=dict)


class StorageSchemeView(_View):
    """One URI scheme the installation serves: ``file`` is the engine's own, the rest are
    storage backends contributed by plugins."""

    scheme: str
    plugin: str = Field(description="The plugin that contributed it ('engine' for file).")
    summary: str = ""
    connection_kind: str | None = Field(
        default=None, description="The connection kind whose settings open it, if any."
    )


class SystemInfo(_View):
    version: str
    schema_revision: str | None = None
    plugins: list[str] = Field(default_factory=list)
    blocks: int = 0
    storage_schemes: list[str] = Field(default_factory=list)
    connection_kinds: list[str] = Field(default_factory=list)
    notifiers: list[str] = Field(default_factory=list)
    enabled_unsafe_blocks: list[str] = Field(default_factory=list)


# --- Triggers, alerts and backfills ------------------------------------------------------
# The operator writes Schedule and Webhook status from ``ScheduleView`` and ``WebhookView``;
# the API serves the same models. None carries a token or a secret: a webhook is shown by the
# prefix of its token, never the token.


class ScheduleView(_View):
    namespace: str
    name: str
    pipeline: str
    paused: bool
    next_fire_at: datetime | None
    last_fire_at: datetime | None
    last_run_id: int | None
    last_error: str | None


class FiringView(_View):
    id: int
    scheduled_for: datetime
    fired_at: datetime
    result: str  # fired | failed
    misfire: bool
    run_id: int | None
    message: str | None


class WebhookView(_View):
    namespace: str
    name: str
    pipeline: str
    enabled: bool
    path: str = Field(description="The URL path, with the token shortened to its prefix.")
    last_delivery_at: datetime | None
    last_delivery_result: str | None


class DeliveryView(_View):
    id: int
    received_at: datetime
    result: str  # accepted | refused
    reason: str | None
    status_code: int
    run_id: int | None
    message: str | None


class NotificationView(_View):
    id: int
    run_id: int
    rule: str
    event: str
    notifier: str
    status: str  # queued | running | delivered | failed
    attempts: int
    subject: str
    body: str
    last_error: str | None
    created_at: datetime
    delivered_at: datetime | None


class BackfillWindow(_View):
    start: datetime
    end: datetime
    run_id: int | None = None
    status: str | None = None  # the run's status when created
    problems: list[Problem] = Field(default_factory=list)


class BackfillRequest(BaseModel):
    """Which schedule's cadence draws the windows, the half-open range, and the params.

    One shape for every door: the REST body (``from``/``to``), ``Engine.backfill``, the client.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schedule: str = Field(min_length=1, max_length=63, description="The schedule whose cadence.")
    start: datetime = Field(alias="from", description="The first firing included (RFC 3339).")
    end: datetime = Field(alias="to", description="Firings before this instant (excluded).")
    params: dict[str, Any] | None = Field(
        default=None, description="The runs' params; the schedule's own when omitted."
    )
    dry_run: bool = Field(default=False, description="List the windows; create no run.")

    @field_validator("start", "end", mode="before")
    @classmethod
    def _text(cls, value: object) -> object:
        # Pydantic would also read a number as a Unix time; the body promises date-time text.
        if not isinstance(value, str | datetime):
            raise ValueError("expected an RFC 3339 date-time such as 2026-01-31T00:00:00Z")
        return value


class BackfillResult(_View):
    pipeline: str
    schedule: str
    dry_run: bool
    created: int
    refused: int
    windows: list[BackfillWindow]
