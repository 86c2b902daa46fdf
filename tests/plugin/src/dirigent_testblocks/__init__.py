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
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from dirigent.sdk import (
    BlockFailure,
    ConnectionField,
    Contribution,
    ErrorClass,
    Issue,
    Message,
    NotYet,
    Operator,
    OperatorSpec,
    ProbeResult,
    RemoteHandle,
    Sensor,
    SensorSpec,
    StepContext,
)
from dirigent_testblocks.notifying import PostNotifier


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
    probe_errors: int = Field(default=0, ge=0, description="Raise on this many probes first.")
    fetch_errors: int = Field(default=0, ge=0, description="Raise on this many fetches first.")
    fetch_sleep: float = Field(default=0.0, ge=0)
    cancel_errors: int = Field(default=0, ge=0, description="Raise on this many cancels first.")


def _count(path: Path) -> int:
    """Bump a counter file and return its new value (one process at a time touches it)."""
    n = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(n))
    return n


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
        if _count(Path(config.dir) / f"probe-errors-{handle.ref}") <= config.probe_errors:
            raise ConnectionError("the API server did not answer")
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
        if _count(Path(config.dir) / f"fetch-errors-{handle.ref}") <= config.fetch_errors:
            raise ConnectionError("the result store did not answer")
        if config.fetch_sleep:
            await asyncio.sleep(config.fetch_sleep)
        return RemoteOutput(ref=handle.ref, polls=int(handle.meta.get("seen", "0")))

    async def cancel(self, handle: RemoteHandle, config: RemoteConfig, ctx: StepContext) -> bool:
        if _count(Path(config.dir) / f"cancel-errors-{handle.ref}") <= config.cancel_errors:
            append_line(f"{config.dir}/events.log", f"cancel-error {handle.ref}")
            raise ConnectionError("the API server did not answer")
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
    peek: str | None = Field(
        default=None, description="A connection name in a field the block does not declare."
    )


class UsesOutput(BaseModel):
    url: str
    token_sha256: str


class Credentials(BaseModel):
    url: str
    token: SecretStr


class UsesConnectionOperator(Operator[UsesConfig, UsesOutput]):
    """Opens its connection through the context; outputs only a digest of the secret.

    ``connection`` is declared (kind http); ``peek`` is not, so the engine never opens what it
    names and asking for it fails, as it would for any block reaching past its declaration.
    """

    spec: ClassVar[OperatorSpec] = OperatorSpec(
        id="testing.uses_connection",
        summary="Open a connection.",
        connection_fields=(ConnectionField(field="connection", kinds=("http",)),),
    )
    config_model: ClassVar[type[BaseModel]] = UsesConfig
    output_model: ClassVar[type[BaseModel]] = UsesOutput

    async def execute(self, config: UsesConfig, ctx: StepContext) -> UsesOutput:
        creds = ctx.connection(config.connection, Credentials)
        if config.peek is not None:
            ctx.connection(config.peek, Credentials)
        digest = hashlib.sha256(creds.token.get_secret_value().encode()).hexdigest()
        return UsesOutput(url=creds.url, token_sha256=digest)


class PoisonConfig(_Config):
    path: str = Field(description="Executions are appended here.")
    where: Literal["none", "output", "log", "error", "message"] = "none"


class PoisonOutput(BaseModel):
    value: str


class PoisonOperator(Operator[PoisonConfig, PoisonOutput]):
    """Puts a NUL character where asked: a value PostgreSQL cannot store."""

    spec: ClassVar[OperatorSpec] = OperatorSpec(id="testing.poison", summary="Emit a NUL.")
    config_model: ClassVar[type[BaseModel]] = PoisonConfig
    output_model: ClassVar[type[BaseModel]] = PoisonOutput

    async def execute(self, config: PoisonConfig, ctx: StepContext) -> PoisonOutput:
        append_line(config.path, f"run {ctx.attempt_id} {json.dumps(ctx.item)}")
        if config.where == "log":
            ctx.log.info("a\x00b")
        if config.where == "error":
            raise BlockFailure(FAILED_NUL, error_class=ErrorClass.UNKNOWN, value="a\x00b")
        return PoisonOutput(value="a\x00b" if config.where == "output" else "fine")


FAILED_NUL = Message("testing.poison.failed", "failed with {value}")


class CrashConfig(_Config):
    path: str


class CrashOperator(Operator[CrashConfig, Empty]):
    """Kills its own worker process (SIGKILL): an attempt no worker survives."""

    spec: ClassVar[OperatorSpec] = OperatorSpec(id="testing.crash", summary="Kill the worker.")
    config_model: ClassVar[type[BaseModel]] = CrashConfig
    output_model: ClassVar[type[BaseModel]] = Empty

    async def execute(self, config: CrashConfig, ctx: StepContext) -> Empty:
        append_line(config.path, f"crash {ctx.attempt_id} {os.getpid()}")
        os.kill(os.getpid(), signal.SIGKILL)
        return Empty()


class LeaksConfig(_Config):
    connection: str
    how: Literal["exception", "failure", "log", "misfit"]


class Misfit(BaseModel):
    """A model the http connection does not fit (no such field): pydantic quoted its input."""

    model_config = {"extra": "forbid"}
    nothing: str


LEAK = Message("testing.leaks.failed", "the upstream said: {said}")


class LeaksOperator(Operator[LeaksConfig, Empty]):
    """Tries to get its connection's token out, in one way a careless block would."""

    spec: ClassVar[OperatorSpec] = OperatorSpec(
        id="testing.leaks",
        summary="Quote a secret.",
        connection_fields=(ConnectionField(field="connection", kinds=("http",)),),
    )
    config_model: ClassVar[type[BaseModel]] = LeaksConfig
    output_model: ClassVar[type[BaseModel]] = Empty

    async def execute(self, config: LeaksConfig, ctx: StepContext) -> Empty:
        if config.how == "misfit":
            ctx.connection(config.connection, Misfit)
        token = ctx.connection(config.connection, Credentials).token.get_secret_value()
        if config.how == "log":
            ctx.log.warning(f"calling with {token}", header=f"Bearer {token}")
            raise BlockFailure(LEAK, error_class=ErrorClass.REJECTED, said="no")
        if config.how == "failure":
            raise BlockFailure(LEAK, error_class=ErrorClass.REJECTED, said=f"bad token {token}")
        raise RuntimeError(f"401 from https://user:{token}@api.example.test/v1")


class ExitsConfig(_Config):
    raises: Literal["SystemExit", "KeyboardInterrupt", "custom"]


class _Custom(BaseException):
    """A BaseException of a block's own making."""


class ExitsOperator(Operator[ExitsConfig, Empty]):
    """Raises a BaseException from inside the block, as a careless ``sys.exit()`` would."""

    spec: ClassVar[OperatorSpec] = OperatorSpec(id="testing.exits", summary="Raise SystemExit.")
    config_model: ClassVar[type[BaseModel]] = ExitsConfig
    output_model: ClassVar[type[BaseModel]] = Empty

    async def execute(self, config: ExitsConfig, ctx: StepContext) -> Empty:
        if config.raises == "SystemExit":
            sys.exit(3)
        if config.raises == "KeyboardInterrupt":
            raise KeyboardInterrupt
        raise _Custom("a custom BaseException")


class TimesOutConfig(_Config):
    pass


class TimesOutOperator(Operator[TimesOutConfig, Empty]):
    """Raises TimeoutError itself: the block's own error, not the step's timeout."""

    spec: ClassVar[OperatorSpec] = OperatorSpec(id="testing.times_out", summary="Raise a timeout.")
    config_model: ClassVar[type[BaseModel]] = TimesOutConfig
    output_model: ClassVar[type[BaseModel]] = Empty

    async def execute(self, config: TimesOutConfig, ctx: StepContext) -> Empty:
        raise TimeoutError("the upstream service timed out")


class TickConfig(_Config):
    path: str = Field(description="One line per poke: the lag behind its due time, seconds.")
    poll: float = Field(description="The step's poll interval, seconds (to compute the lag).")
    pokes: int = Field(default=1_000_000, ge=1)
    cursor_once: bool = Field(default=False, description="Give a cursor on the first poke only.")


class TickOutput(BaseModel):
    pokes: int


class TickSensor(Sensor[TickConfig, TickOutput]):
    """Records how late each poke came, from the time the previous poke ended."""

    spec: ClassVar[SensorSpec] = SensorSpec(id="testing.tick", summary="Measure poke lag.")
    config_model: ClassVar[type[BaseModel]] = TickConfig
    output_model: ClassVar[type[BaseModel]] = TickOutput

    async def poke(self, config: TickConfig, ctx: StepContext) -> TickOutput | NotYet:
        cursor = dict(ctx.cursor or {})
        now = time.time()
        count = int(str(cursor.get("n", 0))) + 1
        if "at" in cursor:
            append_line(config.path, f"{now - float(str(cursor['at'])) - config.poll:.4f} {cursor}")
        else:
            append_line(config.path, f"first {cursor}")
        if count >= config.pokes:
            return TickOutput(pokes=count)
        if config.cursor_once and cursor:
            return NotYet(message="again")
        return NotYet(message="ticking", cursor={"n": count, "at": time.time()})


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
                PoisonOperator(),
                CrashOperator(),
                TimesOutOperator(),
                ExitsOperator(),
                LeaksOperator(),
            ],
            sensors=[TickSensor()],
            notifiers=[PostNotifier()],
        )


plugin = TestingPlugin()
