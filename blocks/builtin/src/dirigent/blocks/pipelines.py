"""``pipeline.run``: starts a child run of another pipeline and waits for it as remote work.

The child is started through ``ctx.runs`` (no HTTP, no credential), attributed to this run
and step, and found again rather than started twice if ``execute`` is replayed. Waiting is
the engine's submit-then-probe: the attempt parks and costs a row, not a worker slot, while
the child runs. Cancelling this step cancels the child; a chain deeper than ``maxDepth``
(a pipeline starting itself) is refused.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, Field, JsonValue

from dirigent.blocks.base import Config, Output
from dirigent.sdk import (
    Duration,
    ErrorClass,
    Message,
    Operator,
    OperatorSpec,
    ProbeResult,
    RemoteHandle,
    StepContext,
)

__all__ = ["PipelineRunOperator"]

CHILD_FAILED = Message("pipeline.run.child_failed", "child run {run_id} of '{pipeline}' {state}")


class RunConfig(Config):
    pipeline: str = Field(description="Pipeline name in the same namespace.")
    params: dict[str, JsonValue] = Field(default_factory=dict)
    wait: bool = Field(default=True, description="Wait for the child to finish.")
    max_depth: int = Field(default=5, ge=1, le=100, description="Longest chain of runs allowed.")


class RunOutput(Output):
    run_id: int
    pipeline: str
    state: str
    outputs: dict[str, JsonValue] = Field(
        default_factory=dict, description="The child's step outputs."
    )


class PipelineRunOperator(Operator[RunConfig, RunOutput]):
    """Starts a child run and (by default) waits for it."""

    spec: ClassVar[OperatorSpec] = OperatorSpec(
        id="pipeline.run",
        group="execute",
        summary="Start a run of another pipeline and wait for it.",
        default_poll=Duration.of(seconds=2),
    )
    config_model: ClassVar[type[BaseModel]] = RunConfig
    output_model: ClassVar[type[BaseModel]] = RunOutput

    async def execute(self, config: RunConfig, ctx: StepContext) -> RunOutput | RemoteHandle:
        started = await ctx.runs.start(config.pipeline, config.params, max_depth=config.max_depth)
        ctx.log.info(
            f"started run {started.run_id} of '{config.pipeline}'", child_run_id=started.run_id
        )
        if not config.wait:
            return RunOutput(run_id=started.run_id, pipeline=config.pipeline, state=started.state)
        return RemoteHandle(block_id=self.spec.id, ref=str(started.run_id))

    async def probe(self, handle: RemoteHandle, config: RunConfig, ctx: StepContext) -> ProbeResult:
        snap = await ctx.runs.snapshot(int(handle.ref))
        if snap is None:
            return ProbeResult.gone(f"run {handle.ref} no longer exists")
        if not snap.terminal:
            return ProbeResult.running(f"child run {snap.run_id} is {snap.state}")
        if snap.state in ("succeeded", "completed_with_errors"):
            return ProbeResult.succeeded(f"child run {snap.run_id} {snap.state}")
        message = CHILD_FAILED.render(run_id=snap.run_id, pipeline=snap.pipeline, state=snap.state)
        if snap.message:
            message += f": {snap.message}"
        return ProbeResult.failed(message, error_class=ErrorClass.UNKNOWN)

    async def fetch(self, handle: RemoteHandle, config: RunConfig, ctx: StepContext) -> RunOutput:
        snap = await ctx.runs.snapshot(int(handle.ref))
        assert snap is not None, "fetch follows a succeeded probe"
        return RunOutput(
            run_id=snap.run_id, pipeline=snap.pipeline, state=snap.state, outputs=snap.outputs
        )

    async def cancel(self, handle: RemoteHandle, config: RunConfig, ctx: StepContext) -> bool:
        return await ctx.runs.cancel(int(handle.ref), reason=f"parent run {ctx.run_id} cancelled")
