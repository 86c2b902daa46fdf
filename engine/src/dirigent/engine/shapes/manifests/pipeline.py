"""The Pipeline manifest: a DAG of steps, each naming a block, plus run-level policy.

Only the shape and per-field grammar live here. Checks that need the whole document
(acyclicity, references, the params schema) are in ``dirigent.engine.rules.validation`` so they
can report every problem at once instead of stopping at the first.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, JsonValue, field_validator

from dirigent.engine.shapes.manifests.base import OPAQUE, Model, ObjectMeta, OpaqueMap
from dirigent.engine.shapes.manifests.enums import (
    AlertEvent,
    ConcurrencyPolicy,
    DeletionPolicy,
    Importance,
    ItemFailurePolicy,
    Priority,
    TimeoutOutcome,
    TriggerRule,
)
from dirigent.sdk.names import BLOCK_ID_PATTERN, EntityName, StepName
from dirigent.sdk.plugins import PLUGIN_ID_PATTERN
from dirigent.sdk.units import Duration

# Block ids are the SDK's rule (dotted: `family.name`); notifier ids are plugin-style ids
# (`log`, `slack`, `acme.pager`), the same rule the SDK applies to plugin ids.
BlockId = Annotated[
    str,
    Field(
        pattern=BLOCK_ID_PATTERN,
        max_length=128,
        description="A block id from the catalog, such as http.request.",
    ),
]


class RetryPolicy(Model):
    """How many times a step may run, and how long to wait between tries."""

    max_attempts: Annotated[int, Field(ge=1, le=100)] = 3
    backoff: Duration = Field(
        default=Duration.parse("10s"), description="Delay before the 2nd attempt."
    )
    max_backoff: Duration = Field(
        default=Duration.parse("10m"), description="Cap for the exponential delay."
    )


class Step(Model):
    """One node of the DAG: a block, its config, and engine semantics around it."""

    block: BlockId
    title: str | None = None
    config: OpaqueMap = Field(default_factory=dict)
    depends_on: list[StepName] = Field(default_factory=list)
    rule: TriggerRule = TriggerRule.ALL_SUCCESS
    retry: RetryPolicy | None = None
    timeout: Duration | None = None
    for_each: JsonValue = Field(
        default=None,
        json_schema_extra=OPAQUE,
        description="A list, or a reference to one (${params.x}, ${steps.s.items}): one item per element.",
    )
    on_item_failure: ItemFailurePolicy = ItemFailurePolicy.FAIL_FAST
    continue_on_failure: bool = False
    poll: Duration | None = Field(
        default=None, description="How often a sensor or remote job is probed."
    )
    deadline: Duration | None = Field(
        default=None, description="How long a sensor may wait in all."
    )
    on_timeout: TimeoutOutcome = TimeoutOutcome.FAIL

    @property
    def max_attempts(self) -> int:
        return self.retry.max_attempts if self.retry is not None else 1


class Requires(Model):
    """The preflight a shared document declares."""

    blocks: list[BlockId] = Field(default_factory=list)
    connections: list[EntityName] = Field(default_factory=list)
    pipelines: list[EntityName] = Field(default_factory=list)
    storage: list[str] = Field(default_factory=list)
    workers: list[str] = Field(
        default_factory=list, description="Tags a worker must carry to claim this."
    )


class Report(Model):
    """A markdown document rendered when a run finishes; no template means the built-in one."""

    template: str | None = None


class Alert(Model):
    """One alert rule: an event, a notifier through a connection, templates, a throttle."""

    name: EntityName
    event: AlertEvent
    notifier: Annotated[
        str, Field(pattern=PLUGIN_ID_PATTERN, description="A notifier id, such as log.")
    ]
    connection: EntityName | None = None
    subject: str | None = None
    body: str | None = None
    throttle: Duration | None = None
    importance: Importance | None = Field(
        default=None,
        description="The least importance a pipeline must declare for this rule to fire.",
    )


class PipelineSpec(Model):
    title: str | None = None
    description: str | None = None
    tags: list[str] = Field(default_factory=list)
    params: OpaqueMap | None = Field(
        default=None, description="A JSON Schema for the run's parameters."
    )
    steps: dict[StepName, Step] = Field(min_length=1)
    concurrency: ConcurrencyPolicy = ConcurrencyPolicy.ALLOW
    priority: Priority = Priority.NORMAL
    importance: Importance = Importance.NORMAL
    requires: Requires | None = None
    report: Report | None = None
    alerts: list[Alert] = Field(default_factory=list)
    deletion_policy: DeletionPolicy = DeletionPolicy.RETAIN

    @field_validator("tags")
    @classmethod
    def _tags_unique(cls, tags: list[str]) -> list[str]:
        if len(set(tags)) != len(tags):
            raise ValueError("tags must be unique")
        return tags


class Pipeline(Model):
    """A Pipeline resource: ``apiVersion: dirigent.dev/v1alpha1``, ``kind: Pipeline``."""

    api_version: Literal["dirigent.dev/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["Pipeline"]
    metadata: ObjectMeta
    spec: PipelineSpec

    @property
    def required_pipelines(self) -> list[str]:
        """The pipelines ``spec.requires.pipelines`` names (none without ``requires``)."""
        return self.spec.requires.pipelines if self.spec.requires else []
