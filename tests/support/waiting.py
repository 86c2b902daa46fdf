"""Waiting for a condition with a deadline: the one way tests/ and e2e/ synchronise.

A fixed sleep proves nothing: too short and the test is flaky, too long and it is slow, and
either way it does not say what it waits for. ``wait_until`` (for sync code) and
``eventually`` (for async code, with a sync or an async probe) call a probe until a
predicate holds of the value it returns, and return that value. When the deadline passes
they raise ``WaitTimedOut``, whose message names what was awaited, the time it had and the
last value the probe returned, so a failure says what the test saw, not only that it waited.

An exception the probe raises ends the wait at once: a process that died or a server that
refused will not get better by asking again, and its own message says more than a timeout.
``e2e.harness.processes.wait_until`` is ``wait_until`` watching a started process too.
``throughout`` is the other way round: a condition that must keep holding for a while (one
Job, not two, while a worker recovers), checked as often and failing at the first value
that breaks it.

Both forms share ``_Waiting`` (the deadline, the tries, the last value), so they time out
the same way: the probe is always called at least once, and once more at the deadline.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar, cast, overload

__all__ = ["StoppedHolding", "WaitTimedOut", "eventually", "throughout", "wait_until"]

T = TypeVar("T")
_NOTHING = object()


class WaitTimedOut(AssertionError):
    """The condition did not hold by the deadline; ``last`` is the probe's last value."""

    def __init__(self, what: str, timeout: float, last: object, tries: int) -> None:
        self.what = what
        self.timeout = timeout
        self.last = last
        self.tries = tries
        super().__init__(
            f"timed out after {timeout:g}s waiting for {what} ({tries} tries); last value: {last!r}"
        )


class StoppedHolding(AssertionError):
    """A condition that had to hold for a while did not; ``value`` is what broke it."""

    def __init__(self, what: str, after: float, value: object) -> None:
        self.what = what
        self.after = after
        self.value = value
        super().__init__(f"{what} stopped holding after {after:.1f}s; value: {value!r}")


class _Waiting:
    """One wait's deadline and what it has seen so far."""

    def __init__(self, what: str, timeout: float, until: Callable[[T], object]) -> None:
        self.what = what
        self.timeout = timeout
        self.until: Callable[[object], object] = cast("Callable[[object], object]", until)
        self.deadline = time.monotonic() + timeout
        self.last: object = _NOTHING
        self.tries = 0

    def holds(self, value: object) -> bool:
        self.tries += 1
        self.last = value
        return bool(self.until(value))

    def pause(self, every: float) -> float:
        """How long to sleep before the next try; raises once the deadline has passed."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise WaitTimedOut(self.what, self.timeout, self.last, self.tries)
        return min(every, left)


def wait_until(
    probe: Callable[[], T],
    until: Callable[[T], object] = bool,
    *,
    what: str,
    timeout: float = 20.0,
    every: float = 0.05,
) -> T:
    """Call ``probe`` until ``until(value)`` holds and return that value; raise
    ``WaitTimedOut`` (naming ``what`` and the last value) after ``timeout`` seconds."""
    waiting = _Waiting(what, timeout, until)
    while True:
        value = probe()
        if waiting.holds(value):
            return value
        time.sleep(waiting.pause(every))


@overload
async def eventually(  # an awaitable probe is awaited: T is what it gives
    probe: Callable[[], Awaitable[T]],
    until: Callable[[T], object] = ...,
    *,
    what: str,
    timeout: float = ...,
    every: float = ...,
) -> T: ...


@overload
async def eventually(
    probe: Callable[[], T],
    until: Callable[[T], object] = ...,
    *,
    what: str,
    timeout: float = ...,
    every: float = ...,
) -> T: ...


async def eventually(
    probe: Callable[[], Awaitable[T]] | Callable[[], T],
    until: Callable[[T], object] = bool,
    *,
    what: str,
    timeout: float = 20.0,
    every: float = 0.05,
) -> T:
    """``wait_until`` for async code: ``probe`` may be a coroutine function or a plain one
    (a file exists, a flag is set); the loop keeps running while it waits."""
    waiting = _Waiting(what, timeout, until)
    while True:
        found = probe()
        value = cast("T", await found if inspect.isawaitable(found) else found)
        if waiting.holds(value):
            return value
        await asyncio.sleep(waiting.pause(every))


async def throughout(
    probe: Callable[[], Awaitable[T]] | Callable[[], T],
    until: Callable[[T], object] = bool,
    *,
    what: str,
    duration: float,
    every: float = 0.05,
) -> None:
    """Check that ``until(probe())`` holds on every call for ``duration`` seconds; raise
    ``StoppedHolding`` with the value that broke it otherwise."""
    began = time.monotonic()
    while True:
        found = probe()
        value = cast("T", await found if inspect.isawaitable(found) else found)
        if not until(value):
            raise StoppedHolding(what, time.monotonic() - began, value)
        left = began + duration - time.monotonic()
        if left <= 0:
            return
        await asyncio.sleep(min(every, left))
