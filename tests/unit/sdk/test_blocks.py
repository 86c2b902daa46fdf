"""A tiny operator and sensor subclass type-check and run against a fake context."""

from __future__ import annotations

from typing import ClassVar

import pytest
from pydantic import BaseModel

from dirigent.sdk import (
    ErrorClass,
    Issue,
    Message,
    NotYet,
    Operator,
    OperatorSpec,
    ProbeResult,
    ProbeStatus,
    RemoteHandle,
    Sensor,
    SensorSpec,
    StepContext,
    block_kind,
)

from .fakes import FakeContext, make_context

EMPTY_WORD = Message("demo.empty_word", "the word cannot be empty")


class EchoConfig(BaseModel):
    word: str


class EchoOutput(BaseModel):
    echoed: str
    uri: str


class Echo(Operator[EchoConfig, EchoOutput]):
    spec: ClassVar[OperatorSpec] = OperatorSpec(id="demo.echo", summary="Echo a word")
    config_model = EchoConfig
    output_model = EchoOutput

    async def execute(self, config: EchoConfig, ctx: StepContext) -> EchoOutput | RemoteHandle:
        ctx.log.info("echoing", word=config.word)
        uri = await ctx.capture("word.txt", config.word.encode(), "text/plain")
        return EchoOutput(echoed=config.word, uri=uri)

    def check_config(self, config: EchoConfig) -> list[Issue]:
        return [Issue.of(EMPTY_WORD, location=("word",))] if not config.word else []


class JobConfig(BaseModel):
    name: str


class JobOutput(BaseModel):
    exit_code: int


class Job(Operator[JobConfig, JobOutput]):
    spec: ClassVar[OperatorSpec] = OperatorSpec(id="demo.job", idempotent=True)
    config_model = JobConfig
    output_model = JobOutput

    async def execute(self, config: JobConfig, ctx: StepContext) -> JobOutput | RemoteHandle:
        return RemoteHandle(block_id=self.spec.id, ref=f"job-{config.name}")

    async def probe(self, handle: RemoteHandle, config: JobConfig, ctx: StepContext) -> ProbeResult:
        seen = int(handle.meta.get("probes", "0")) + 1
        if seen < 2:
            return ProbeResult.running("pending", progress=0.5, meta={"probes": str(seen)})
        return ProbeResult.succeeded()

    async def fetch(self, handle: RemoteHandle, config: JobConfig, ctx: StepContext) -> JobOutput:
        return JobOutput(exit_code=0)


class HalfDone(Operator[JobConfig, JobOutput]):
    spec: ClassVar[OperatorSpec] = OperatorSpec(id="demo.half")
    config_model = JobConfig
    output_model = JobOutput

    async def execute(self, config: JobConfig, ctx: StepContext) -> JobOutput | RemoteHandle:
        return RemoteHandle(block_id=self.spec.id, ref="x")


class WaitConfig(BaseModel):
    target: int


class WaitOutput(BaseModel):
    reached: int


class CountsUp(Sensor[WaitConfig, WaitOutput]):
    spec: ClassVar[SensorSpec] = SensorSpec(id="demo.reached")
    config_model = WaitConfig
    output_model = WaitOutput

    async def poke(self, config: WaitConfig, ctx: StepContext) -> WaitOutput | NotYet:
        seen = int(str((ctx.cursor or {}).get("seen", 0))) + 1
        if seen >= config.target:
            return WaitOutput(reached=seen)
        return NotYet(message=f"{seen} of {config.target}", cursor={"seen": seen})


async def test_synchronous_operator_runs() -> None:
    ctx = FakeContext()
    result = await Echo().execute(EchoConfig(word="hi"), ctx)
    assert isinstance(result, EchoOutput)
    assert result.echoed == "hi"
    assert await ctx.storage.read_bytes(result.uri) == b"hi"
    assert result.uri.startswith(ctx.scratch)
    assert ctx.log.lines == [("info", "echoing", {"word": "hi"})]


async def test_async_operator_round_trip() -> None:
    ctx = make_context()
    op, config = Job(), JobConfig(name="a")
    handle = await op.execute(config, ctx)
    assert isinstance(handle, RemoteHandle)
    first = await op.probe(handle, config, ctx)
    assert first.status is ProbeStatus.RUNNING
    assert first.meta is not None
    # meta replaces the handle's meta for the next probe
    handle = handle.model_copy(update={"meta": first.meta})
    second = await op.probe(handle, config, ctx)
    assert second.status is ProbeStatus.SUCCEEDED
    assert await op.fetch(handle, config, ctx) == JobOutput(exit_code=0)
    assert await op.cancel(handle, config, ctx) is False


async def test_handle_without_probe_is_a_rejected_error() -> None:
    ctx = make_context()
    op, config = HalfDone(), JobConfig(name="a")
    handle = await op.execute(config, ctx)
    assert isinstance(handle, RemoteHandle)
    with pytest.raises(NotImplementedError, match="does not implement probe") as info:
        await op.probe(handle, config, ctx)
    assert op.classify_error(info.value) is ErrorClass.REJECTED
    with pytest.raises(NotImplementedError, match="does not implement fetch"):
        await op.fetch(handle, config, ctx)


async def test_sensor_pokes_until_the_condition_holds() -> None:
    sensor, config = CountsUp(), WaitConfig(target=3)
    cursor = None
    results: list[WaitOutput | NotYet] = []
    for _ in range(3):
        result = await sensor.poke(config, FakeContext(cursor=cursor))
        results.append(result)
        if isinstance(result, NotYet):
            cursor = result.cursor
    assert [type(r) for r in results] == [NotYet, NotYet, WaitOutput]
    assert results[-1] == WaitOutput(reached=3)


def test_defaults_and_kinds() -> None:
    assert Echo().check_config(EchoConfig(word="x")) == []
    issues = Echo().check_config(EchoConfig(word=""))
    assert [(i.code, i.location) for i in issues] == [("demo.empty_word", ("word",))]
    assert CountsUp().check_config(WaitConfig(target=1)) == []
    assert CountsUp().classify_error(TimeoutError()) is ErrorClass.TRANSIENT
    assert block_kind(Echo()) == "operator"
    assert block_kind(Job) == "operator"
    assert block_kind(CountsUp()) == "sensor"
    with pytest.raises(TypeError, match="neither"):
        block_kind(object())


def test_abstract_blocks_cannot_be_instantiated() -> None:
    class NoExecute(Operator[EchoConfig, EchoOutput]):
        pass

    with pytest.raises(TypeError):
        NoExecute()  # type: ignore[abstract]
