"""The REST API's request and response shapes, importable without the server.

One Pydantic model per shape, shared by every door: the read views are the engine's own
(``dirigent.engine.shapes.views``), re-exported here so a client imports one module; only the shapes
that exist because of HTTP — request bodies, the Problem document, a plan, a cancel receipt —
are defined here. ``dirigent.api.client`` parses responses with exactly these models.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from dirigent.engine.shapes.problems import Problem
from dirigent.engine.shapes.views import (
    ArtifactView,
    AttemptView,
    BackfillRequest,
    BackfillResult,
    BackfillWindow,
    BlockView,
    ConnectionView,
    DeliveryView,
    EngineEvent,
    FailureView,
    FiringView,
    ItemView,
    LogView,
    Page,
    PipelineSummary,
    PipelineVersionView,
    RunDetail,
    RunSummary,
    ScheduleView,
    StepDetail,
    StorageSchemeView,
    SystemInfo,
    WebhookView,
    WorkerView,
)

__all__ = [
    "PROBLEM_JSON",
    "ApplyPlan",
    "ArtifactView",
    "AttemptView",
    "BackfillRequest",
    "BackfillResult",
    "BackfillWindow",
    "BlockView",
    "CancelReceipt",
    "CancelRequest",
    "ConnectionView",
    "DeliveryView",
    "EngineEvent",
    "FailureView",
    "FiringView",
    "Health",
    "ItemView",
    "LogView",
    "ManifestDocument",
    "Page",
    "PipelineDetail",
    "PipelineSummary",
    "PipelineVersionView",
    "Problem",
    "ProblemDocument",
    "RetryReceipt",
    "RetryRequest",
    "RunCreatedView",
    "RunDetail",
    "RunRequestBody",
    "RunStatus",
    "RunSummary",
    "ScheduleView",
    "StepDetail",
    "StorageSchemeView",
    "SystemInfo",
    "ValidationReport",
    "WebhookView",
    "WorkerView",
]

PROBLEM_JSON = "application/problem+json"

RunStatus = Literal[
    "queued", "running", "succeeded", "completed_with_errors", "failed", "cancelled"
]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProblemDocument(BaseModel):
    """Every non-2xx body (``application/problem+json``), whatever refused the request."""

    type: str = Field(default="about:blank", description="A URI naming the problem type.")
    title: str = Field(description="The HTTP status phrase.")
    status: int = Field(description="The HTTP status, repeated so a logged body stands alone.")
    detail: str = Field(description="One sentence a person can act on.")
    code: str = Field(description="Stable dotted code the detail was rendered from.")
    params: dict[str, Any] = Field(default_factory=dict)
    problems: list[Problem] = Field(
        default_factory=list, description="Every problem, when the refusal is a list of them."
    )
    instance: str = Field(description="The path that was asked for.")


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    checks: dict[str, str] = Field(default_factory=dict)


class PipelineDetail(BaseModel):
    """One pipeline: its listing row and its current canonical document."""

    summary: PipelineSummary
    document: dict[str, Any] | None = None


class ValidationReport(BaseModel):
    """A stored version re-checked against today's catalog and connections."""

    valid: bool
    problems: list[Problem] = Field(default_factory=list)


class StepChanges(BaseModel):
    added: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    changed: list[str] = Field(default_factory=list)


class ApplyPlan(BaseModel):
    """What an apply did, or with ``dry_run`` what it would do, and the digest it has."""

    kind: str
    name: str
    namespace: str
    action: Literal["created", "updated", "unchanged", "activated"]
    dry_run: bool
    version: int | None = None
    digest: str | None = None
    previous_digest: str | None = None
    steps: StepChanges = Field(default_factory=StepChanges)
    changed_fields: list[str] = Field(
        default_factory=list, description="Top-level spec fields other than steps that moved."
    )


class ManifestDocument(BaseModel):
    """A whole manifest as JSON: the envelope is checked here, the rest by the engine."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    api_version: Literal["dirigent.dev/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["Pipeline", "Schedule", "Webhook", "Connection"]
    metadata: dict[str, Any]
    spec: dict[str, Any]


class RunRequestBody(_Body):
    """Parameters of a new run, validated against the pipeline's parameter schema."""

    params: dict[str, Any] = Field(default_factory=dict)


class RunCreatedView(BaseModel):
    run_id: int
    status: str
    created: bool = Field(description="False when the Idempotency-Key found an earlier run.")
    replaced: list[int] = Field(default_factory=list)


class CancelRequest(_Body):
    reason: str = Field(default="cancelled through the API", min_length=1, max_length=500)


class CancelReceipt(BaseModel):
    run_id: int
    status: str
    remotes_told: int


class RetryRequest(_Body):
    """Retry a failed step once more, or exactly its failed items."""

    step: str = Field(min_length=1, max_length=63)


class RetryReceipt(BaseModel):
    run_id: int
    step: str
    attempt_ids: list[int]
    created: bool = Field(description="False when the Idempotency-Key found an earlier retry.")
