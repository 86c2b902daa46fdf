"""``shell.run``: runs a command on the worker, behind the unsafe-block gate.

Why gated: it runs whatever the document says with the worker's rights, so an instance
must name it in ``DIRIGENT_ENABLED_UNSAFE_BLOCKS``. The process starts in a session of its
own; when the step's timeout fires or the attempt is cancelled (the engine cancels the
call), the whole process group is killed, so no grandchild outlives the step. stdout and
stderr are streamed whole to the attempt's scratch (``stdout``, ``stderr``) and only a tail
of each is kept in the output, so a chatty command cannot grow a row or a worker's memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections import deque
from typing import ClassVar

from pydantic import BaseModel, Field

from dirigent.blocks.base import Config, Output
from dirigent.sdk import (
    BlockFailure,
    ErrorClass,
    Issue,
    Message,
    ObjectWriter,
    Operator,
    OperatorSpec,
    Size,
    StepContext,
)

__all__ = ["ShellRunOperator"]

EXIT = Message("shell.exit", "the command exited with {exit_code}: {stderr_tail}")
NOT_FOUND = Message("shell.not_found", "cannot start the command: {error}")
COMMAND_BOTH = Message("shell.command.ambiguous", "give 'command' (argv) or 'script', not both")
COMMAND_NONE = Message("shell.command.missing", "give 'command' (argv) or 'script'")


class ShellConfig(Config):
    command: list[str] | None = Field(default=None, description="argv, run without a shell.")
    script: str | None = Field(default=None, description="Run with /bin/sh -c.")
    env: dict[str, str] = Field(default_factory=dict, description="Added to the environment.")
    inherit_env: bool = Field(default=False, description="Pass the worker's environment on.")
    tail: Size = Field(default=Size(4096), description="Bytes of each stream kept in the output.")
    ok_exit_codes: list[int] = Field(default_factory=lambda: [0])


class ShellOutput(Output):
    exit_code: int
    stdout_tail: str
    stderr_tail: str
    stdout_uri: str
    stderr_uri: str


class _Tail:
    """The last ``limit`` bytes seen, in bounded memory."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.chunks: deque[bytes] = deque()
        self.size = 0

    def add(self, chunk: bytes) -> None:
        self.chunks.append(chunk)
        self.size += len(chunk)
        while self.chunks and self.size - len(self.chunks[0]) >= self.limit:
            self.size -= len(self.chunks.popleft())

    def text(self) -> str:
        data = b"".join(self.chunks)
        return data[-self.limit :].decode("utf-8", errors="replace") if self.limit else ""


async def _pump(stream: asyncio.StreamReader, writer: ObjectWriter, tail: _Tail) -> None:
    while chunk := await stream.read(64 * 1024):
        tail.add(chunk)
        await writer.write(chunk)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


class ShellRunOperator(Operator[ShellConfig, ShellOutput]):
    """Runs a command; output exit code and stream tails; whole streams to storage."""

    spec: ClassVar[OperatorSpec] = OperatorSpec(
        id="shell.run",
        group="execute",
        summary="Run a command on the worker (unsafe: must be enabled).",
        description=(
            "Fails with `shell.exit` unless the exit code is in `okExitCodes`. The environment "
            "holds only PATH and `env` unless `inheritEnv`. A timeout or cancel kills the "
            "process group; stdout/stderr go whole to `stdout_uri`/`stderr_uri`."
        ),
        local_execution=True,
    )
    config_model: ClassVar[type[BaseModel]] = ShellConfig
    output_model: ClassVar[type[BaseModel]] = ShellOutput

    def check_config(self, config: ShellConfig) -> list[Issue]:
        if config.command is not None and config.script is not None:
            return [Issue.of(COMMAND_BOTH, location=("script",))]
        if not config.command and config.script is None:
            return [Issue.of(COMMAND_NONE)]
        return []

    async def execute(self, config: ShellConfig, ctx: StepContext) -> ShellOutput:
        argv = config.command or ["/bin/sh", "-c", config.script or ""]
        env = {**(os.environ if config.inherit_env else {"PATH": os.defpath}), **config.env}
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
        except OSError as err:
            raise BlockFailure(NOT_FOUND, error_class=ErrorClass.REJECTED, error=str(err)) from err
        base = f"{ctx.scratch}/steps/{ctx.step}/{ctx.attempt_id}"
        tails = (_Tail(config.tail.bytes), _Tail(config.tail.bytes))
        try:
            async with (
                ctx.storage.open_write(f"{base}/stdout", "text/plain") as out,
                ctx.storage.open_write(f"{base}/stderr", "text/plain") as errs,
            ):
                assert proc.stdout is not None
                assert proc.stderr is not None
                await asyncio.gather(
                    _pump(proc.stdout, out, tails[0]), _pump(proc.stderr, errs, tails[1])
                )
                code = await proc.wait()
        except BaseException:
            # Timeout, cancel or a storage failure: nothing of the command may outlive us.
            _kill_group(proc.pid)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            raise
        _kill_group(proc.pid)  # a background grandchild still holding the session
        output = ShellOutput(
            exit_code=code,
            stdout_tail=tails[0].text(),
            stderr_tail=tails[1].text(),
            stdout_uri=f"{base}/stdout",
            stderr_uri=f"{base}/stderr",
        )
        if code not in config.ok_exit_codes:
            ctx.log.error("command failed", exit_code=code, stdout_uri=output.stdout_uri)
            raise BlockFailure(
                EXIT,
                error_class=ErrorClass.UNKNOWN,
                exit_code=code,
                stderr_tail=output.stderr_tail[-500:],
                stdout_uri=output.stdout_uri,
                stderr_uri=output.stderr_uri,
            )
        return output
