"""A pool of child processes, reused while they answer, killed when a call is abandoned.

Invariants:
- a child serves one call at a time; at most ``size`` run at once (more calls wait);
- a call that is cancelled (the step's timeout) or fails in transport kills its child, which
  is never reused: whatever it was computing stops with it;
- a child reads from a pipe the worker holds, so it ends when the worker does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from typing import Any

__all__ = ["ChildPool"]

_LIMIT = 64 * 1024 * 1024  # the largest answer line a child may send


class _Child:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def call(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None  # both pipes are asked for at spawn
        assert self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        await self.proc.stdin.drain()
        line = await self.proc.stdout.readline()
        if not line:
            raise ConnectionError(f"the program child exited ({self.proc.returncode})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()


class ChildPool:
    """Children running ``python -m <module>`` (one JSON request and answer a line)."""

    def __init__(self, module: str, size: int = 4) -> None:
        self.module = module
        self.size = size
        self._idle: list[_Child] = []
        self._slots: asyncio.Semaphore | None = None
        self.spawned = 0  # children started: a killed one is replaced, for tests and metrics

    async def call(self, request: dict[str, Any]) -> dict[str, Any]:
        if self._slots is None:  # made on first use, in the loop that uses it
            self._slots = asyncio.Semaphore(self.size)
        async with self._slots:
            child = self._idle.pop() if self._idle else await self._spawn()
            try:
                answer = await child.call(request)
            except BaseException:
                child.kill()  # cancelled mid-program, or broken: never reused
                raise
            self._idle.append(child)
            return answer

    async def _spawn(self) -> _Child:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            self.module,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=_LIMIT,
        )
        self.spawned += 1
        return _Child(proc)
