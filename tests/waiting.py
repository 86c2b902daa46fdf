"""``eventually``: wait for a condition with a deadline — the only way tests synchronise.

A fixed sleep proves nothing: too short and the test is flaky, too long and it is slow, and
either way it does not say what it waits for. ``eventually`` polls the condition and fails
with the condition's last value when the deadline passes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T]],
    until: Callable[[T], bool] = bool,
    *,
    timeout: float = 20.0,
    every: float = 0.05,
    what: str = "condition",
) -> T:
    """Call ``probe`` until ``until(value)`` holds; return that value, or fail at the deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await probe()
        if until(value):
            return value
        if loop.time() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout}s; last value: {value!r}")
        await asyncio.sleep(every)


async def until(
    check: Callable[[], object],
    *,
    timeout: float = 20.0,
    every: float = 0.05,
    what: str = "condition",
) -> None:
    """``eventually`` for a condition that needs no awaiting (a file exists, a flag is set)."""

    async def probe() -> object:
        return check()

    await eventually(probe, timeout=timeout, every=every, what=what)
