"""The ``core`` family: blocks that need nothing outside the engine.

They are the smallest honest blocks — doing nothing, echoing a value, sleeping, failing
on purpose, waiting — and they are what examples, tests and benchmarks are built from.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from dirigent.sdk import (
    BlockFailure,
    ErrorClass,
    Message,
    NotYet,
    Operator,
    OperatorSpec,
    Sensor,
    SensorSpec,
    StepContext,
)


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Empty(_Config):
    """No configuration."""


class NoopOperator(Operator[Empty, Empty]):
    """Does nothing and succeeds: the cost of a step in the engine, and nothing else."""

    spec: ClassVar[OperatorSpec] = OperatorSpec(
        id="core.noop", summary="Do nothing and succeed.", idempotent=True
    )
    config_model: ClassVar[type[BaseModel]] = Empty
    output_model: ClassVar[type[BaseModel]] = Empty

    async def execute(self, config: Empty, ctx: StepContext) -> Empty:
        return Empty()


class EchoConfig(_Config):
    value: JsonValue = Field(default=None, description="Any JSON value, references resolved.")


class EchoOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    value: JsonValue = None


class EchoOperator(Operator[EchoConfig, EchoOutput]):
    """Returns its config's value as output: how a value enters a pipeline."""

    spec: ClassVar[OperatorSpec] = OperatorSpec(
        id="core.echo", summary="Output the configured value.", idempotent=True
    )
    config_model: ClassVar[type[BaseModel]] = EchoConfig
    output_model: ClassVar[type[BaseModel]] = EchoOutput

    async def execute(self, config: EchoConfig, ctx: StepContext) -> EchoOutput:
        return EchoOutput(value=config.value)


class SleepConfig(_Config):
    seconds: float = Field(ge=0, le=86_400, description="How long to sleep.")


class SleepOperator(Operator[SleepConfig, Empty]):
    """Holds a worker slot for a while: for timeouts, cancellation and crash tests."""

    spec: ClassVar[OperatorSpec] = OperatorSpec(id="core.sleep", summary="Sleep, then succeed.")
    config_model: ClassVar[type[BaseModel]] = SleepConfig
    output_model: ClassVar[type[BaseModel]] = Empty

    async def execute(self, config: SleepConfig, ctx: StepContext) -> Empty:
        await asyncio.sleep(config.seconds)
        return Empty()


FAILED_ON_PURPOSE = Message("core.fail.requested", "failed on purpose: {message}")


class FailConfig(_Config):
    message: str = "core.fail was asked to fail"
    error_class: ErrorClass = Field(default=ErrorClass.UNKNOWN, alias="errorClass")
    times: int | None = Field(
        default=None, ge=1, description="Fail only the first N attempts, then succeed."
    )


class FailOperator(Operator[FailConfig, Empty]):
    """Fails with a chosen error class: how retry and trigger-rule behaviour is shown."""

    spec: ClassVar[OperatorSpec] = OperatorSpec(id="core.fail", summary="Fail on purpose.")
    config_model: ClassVar[type[BaseModel]] = FailConfig
    output_model: ClassVar[type[BaseModel]] = Empty

    async def execute(self, config: FailConfig, ctx: StepContext) -> Empty:
        if config.times is not None and ctx.attempt > config.times:
            return Empty()
        raise BlockFailure(
            FAILED_ON_PURPOSE, error_class=config.error_class, message=config.message
        )


class WaitConfig(_Config):
    until: dt.datetime | None = Field(default=None, description="Hold until this instant.")
    pokes: int | None = Field(default=None, ge=1, description="Hold for this many pokes.")


class WaitOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pokes: int


class WaitSensor(Sensor[WaitConfig, WaitOutput]):
    """Holds until an instant, or for a number of pokes: a sensor with no outside world."""

    spec: ClassVar[SensorSpec] = SensorSpec(id="core.wait", summary="Wait for a time or N pokes.")
    config_model: ClassVar[type[BaseModel]] = WaitConfig
    output_model: ClassVar[type[BaseModel]] = WaitOutput

    async def poke(self, config: WaitConfig, ctx: StepContext) -> WaitOutput | NotYet:
        cursor: dict[str, Any] = dict(ctx.cursor or {})
        count = int(cursor.get("pokes", 0)) + 1
        due_time = config.until is None or dt.datetime.now(dt.UTC) >= config.until
        due_pokes = config.pokes is None or count >= config.pokes
        if due_time and due_pokes:
            return WaitOutput(pokes=count)
        progress = min(count / config.pokes, 1.0) if config.pokes else None
        # A message that stays the same while nothing new happens: the engine logs a
        # message when it changes, so a per-poke message would log every poke.
        waiting_for = [f"{config.pokes} pokes"] if config.pokes else []
        waiting_for += [config.until.isoformat()] if config.until else []
        return NotYet(
            message=f"waiting for {' and '.join(waiting_for) or 'nothing'}",
            progress=progress,
            cursor={"pokes": count},
        )
