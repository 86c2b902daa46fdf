"""Blocks a third party might write, for the engine's tests.

They observe themselves through files (one line per execution, appended atomically), so a
test can count executions across worker *processes* — which is how "never run twice" is
proven rather than assumed.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from dirigent.sdk import (
    BlockFailure,
    Contribution,
    ErrorClass,
    Issue,
    Message,
    Operator,
    OperatorSpec,
    ProbeResult,
    RemoteHandle,
    StepContext,
)


def append_line(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RecordConfig(_Config):
    path: str
    sleep: float = Field(default=0.0, ge=0)


class RecordOutput(BaseModel):
    attempt_id: int


class RecordOperator(Operator[RecordConfig, RecordOutput]):
    """Appends 'start|end <attempt_id> <step> <pid> <item>' to a file, optionally sleeping between."""

    spec: ClassVar[OperatorSpec] = OperatorSpec(id="testing.record", summary="Record an execution.")
    config_model: ClassVar[type[BaseModel]] = RecordConfig
    output_model: ClassVar[type[BaseModel]] = RecordOutput

    async def execute(self, config: RecordConfig, ctx: StepContext) -> RecordOutput:
        append_line(
            config.path, f"start {ctx.attempt_id} {ctx.step} {os.getpid()} {json.dumps(ctx.item)}"
        )
        if config.sleep:
            await asyncio.sleep(config.sleep)
        append_line(
            config.path, f"end {ctx.attempt_id} {ctx.step} {os.getpid()} {json.dumps(ctx.item)}"
        )
        ctx.log.info("recorded", attempt_id=ctx.attempt_id)
        return RecordOutput(attempt_id=ctx.attempt_id)


FORBIDDEN = Message("testing.value.forbidden", "the value '{value}' is forbidden")


class CheckedConfig(_Config):
    value: str


class CheckedOperator(Operator[CheckedConfig, CheckedConfig]):
    """Refuses the value 'forbidden' at apply time, through check_config."""

    spec: ClassVar[OperatorSpec] = OperatorSpec(id="testing.checked", summary="Check config.")
    config_model: ClassVar[type[BaseModel]] = CheckedConfig
    output_model: ClassVar[type[BaseModel]] = CheckedConfig

    def check_config(self, config: CheckedConfig) -> list[Issue]:
        if config.value == "forbidden":
            return [Issue.of(FORBIDDEN, location=("value",), value=config.value)]
        return []

    async def execute(self, config: CheckedConfig, ctx: StepContext) -> CheckedConfig:
        return config


class Empty(_Config):
    pass


class UnsafeOperator(Operator[Empty, Empty]):
    """Declares local_execution: gated by DIRIGENT_ENABLED_UNSAFE_BLOCKS."""

    spec: ClassVar[OperatorSpec] = OperatorSpec(
        id="testing.unsafe", summary="Pretend to run code.", local_execution=True
    )
    config_model: ClassVar[type[BaseModel]] = Empty
    output_model: ClassVar[type[BaseModel]] = Empty

    async def execute(self, config: Empty, ctx: StepContext) -> Empty:
        return Empty()


class RemoteConfig(_Config):
    dir: str
    polls: int = Field(default=2, ge=0)
    outcome: Literal["succeeded", "failed"] = "succeeded"
    probe_sleep: float = Field(default=0.0, ge=0)
    submit_sleep: float = Field(default=0.0, ge=0)


class RemoteOutput(BaseModel):
    ref: str
    polls: int


class RemoteOperator(Operator[RemoteConfig, RemoteOutput]):
    """Submits a 'job' (a file), then reports running until probed ``polls`` times.

    A deleted job file reads as GONE. Every submit, probe, fetch and cancel is appended to a
    log in ``dir``, so tests count them across processes.
    """

    spec: ClassVar[OperatorSpec] = OperatorSpec(
        id="testing.remote", summary="A fake remote job.", default_poll="1s"
    )
    config_model: ClassVar[type[BaseModel]] = RemoteConfig
    output_model: ClassVar[type[BaseModel]] = RemoteOutput

    def _job(self, config: RemoteConfig, ref: str) -> Path:
        return Path(config.dir) / f"job-{ref}.json"

    async def execute(self, config: RemoteConfig, ctx: StepContext) -> RemoteHandle:
        ref = uuid.uuid4().hex[:12]
        Path(config.dir).mkdir(parents=True, exist_ok=True)
        self._job(config, ref).write_text(json.dumps({"polls": 0}))
        append_line(f"{config.dir}/events.log", f"submit {ref} {ctx.attempt_id}")
        if config.submit_sleep:
            await asyncio.sleep(config.submit_sleep)
        return RemoteHandle(block_id=self.spec.id, ref=ref, meta={"seen": "0"})

    async def probe(
        self, handle: RemoteHandle, config: RemoteConfig, ctx: StepContext
    ) -> ProbeResult:
        append_line(f"{config.dir}/events.log", f"probe {handle.ref} {handle.meta.get('seen')}")
        if config.probe_sleep:
            await asyncio.sleep(config.probe_sleep)
        job = self._job(config, handle.ref)
        if not job.exists():
            return ProbeResult.gone("no such job")
        polls = json.loads(job.read_text())["polls"] + 1
        job.write_text(json.dumps({"polls": polls}))
        if polls < config.polls:
            return ProbeResult.running(
                f"poll {polls}", progress=polls / max(config.polls, 1), meta={"seen": str(polls)}
            )
        if config.outcome == "failed":
            return ProbeResult.failed("the job failed remotely")
        return ProbeResult.succeeded(meta={"seen": str(polls)})

    async def fetch(
        self, handle: RemoteHandle, config: RemoteConfig, ctx: StepContext
    ) -> RemoteOutput:
        append_line(f"{config.dir}/events.log", f"fetch {handle.ref}")
        return RemoteOutput(ref=handle.ref, polls=int(handle.meta.get("seen", "0")))

    async def cancel(self, handle: RemoteHandle, config: RemoteConfig, ctx: StepContext) -> bool:
        append_line(f"{config.dir}/events.log", f"cancel {handle.ref}")
        return True


NOT_YET_OK = Message("testing.flaky.missing", "{path} does not exist yet")


class FlakyConfig(_Config):
    needs: str = Field(description="Fail (rejected) until this file exists.")


class FlakyOperator(Operator[FlakyConfig, FlakyConfig]):
    """Fails until a file exists: lets a test decide, per item, when a retry will succeed."""

    spec: ClassVar[OperatorSpec] = OperatorSpec(
        id="testing.flaky", summary="Fail until a file exists."
    )
    config_model: ClassVar[type[BaseModel]] = FlakyConfig
    output_model: ClassVar[type[BaseModel]] = FlakyConfig

    async def execute(self, config: FlakyConfig, ctx: StepContext) -> FlakyConfig:
        if not Path(config.needs).exists():
            raise BlockFailure(NOT_YET_OK, error_class=ErrorClass.REJECTED, path=config.needs)
        return config


class UsesConfig(_Config):
    connection: str


class UsesOutput(BaseModel):
    url: str
    token_sha256: str


class Credentials(BaseModel):
    url: str
    token: SecretStr


class UsesConnectionOperator(Operator[UsesConfig, UsesOutput]):
    """Opens its connection through the context; outputs only a digest of the secret."""

    spec: ClassVar[OperatorSpec] = OperatorSpec(
        id="testing.uses_connection", summary="Open a connection."
    )
    config_model: ClassVar[type[BaseModel]] = UsesConfig
    output_model: ClassVar[type[BaseModel]] = UsesOutput

    async def execute(self, config: UsesConfig, ctx: StepContext) -> UsesOutput:
        creds = ctx.connection(config.connection, Credentials)
        digest = hashlib.sha256(creds.token.get_secret_value().encode()).hexdigest()
        return UsesOutput(url=creds.url, token_sha256=digest)


class TestingPlugin:
    def contribute(self) -> Contribution:
        return Contribution(
            operators=[
                RecordOperator(),
                CheckedOperator(),
                UnsafeOperator(),
                RemoteOperator(),
                FlakyOperator(),
                UsesConnectionOperator(),
            ]
        )


plugin = TestingPlugin()
