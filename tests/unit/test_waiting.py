"""The waiting helper (``tests.support.waiting``): what it returns, and what it says when the
deadline passes, in both its forms."""

from __future__ import annotations

import itertools
import time

import pytest

from tests.support.waiting import StoppedHolding, WaitTimedOut, eventually, throughout, wait_until


def test_wait_until_returns_the_value_that_satisfied_the_predicate() -> None:
    counter = itertools.count(1)
    seen: list[int] = []

    def probe() -> int:
        seen.append(next(counter))
        return seen[-1]

    assert wait_until(probe, lambda n: n >= 3, what="three", every=0.001) == 3
    assert seen == [1, 2, 3]  # asked until it held, and no more


def test_wait_until_times_out_naming_what_and_the_last_value() -> None:
    counter = itertools.count(1)
    started = time.monotonic()
    with pytest.raises(WaitTimedOut) as timed_out:
        wait_until(lambda: next(counter), lambda n: n < 0, what="run 7 finished", timeout=0.2)
    waited = time.monotonic() - started
    error = timed_out.value
    assert isinstance(error, AssertionError)  # pytest reports it as the test's failure
    assert (error.what, error.timeout, error.last) == ("run 7 finished", 0.2, error.tries)
    assert error.tries >= 2
    assert str(error) == (
        f"timed out after 0.2s waiting for run 7 finished ({error.tries} tries); "
        f"last value: {error.tries}"
    )
    assert 0.2 <= waited < 2


def test_the_probe_is_asked_once_even_with_no_time_left() -> None:
    with pytest.raises(WaitTimedOut) as timed_out:
        wait_until(lambda: "queued", lambda s: s == "succeeded", what="the run", timeout=0)
    assert (timed_out.value.tries, timed_out.value.last) == (1, "queued")
    assert wait_until(lambda: "succeeded", what="the run", timeout=0) == "succeeded"


def test_an_exception_from_the_probe_ends_the_wait_at_once() -> None:
    calls: list[int] = []

    def probe() -> bool:
        calls.append(1)
        raise RuntimeError("the server exited")

    with pytest.raises(RuntimeError, match="the server exited"):
        wait_until(probe, what="the server ready", timeout=10)
    assert calls == [1]


async def test_eventually_returns_the_value_of_an_async_probe() -> None:
    counter = itertools.count(1)

    async def probe() -> dict[str, int]:
        return {"done": next(counter)}

    got = await eventually(probe, lambda v: v["done"] == 4, what="four", every=0.001)
    assert got == {"done": 4}


async def test_eventually_takes_a_sync_probe_too() -> None:
    flags = iter([[], [], ["set"]])
    assert await eventually(lambda: next(flags), what="a flag", every=0.001) == ["set"]


async def test_eventually_times_out_naming_what_and_the_last_value() -> None:
    async def probe() -> str:
        return "running"

    with pytest.raises(WaitTimedOut) as timed_out:
        await eventually(probe, lambda s: s == "succeeded", what="run 7 finished", timeout=0.1)
    message = str(timed_out.value)
    assert message.startswith("timed out after 0.1s waiting for run 7 finished (")
    assert message.endswith("tries); last value: 'running'")
    assert timed_out.value.last == "running"


async def test_throughout_checks_until_the_duration_ends() -> None:
    calls: list[int] = []

    def one_job() -> int:
        calls.append(1)
        return 1

    started = time.monotonic()
    await throughout(one_job, lambda n: n == 1, what="one Job", duration=0.2, every=0.01)
    assert time.monotonic() - started >= 0.2
    assert len(calls) >= 5


async def test_throughout_fails_at_the_first_value_that_breaks_it() -> None:
    counts = iter([1, 1, 2, 1])
    with pytest.raises(StoppedHolding) as broke:
        await throughout(
            lambda: next(counts), lambda n: n == 1, what="one Job", duration=10, every=0.001
        )
    assert broke.value.value == 2
    assert str(broke.value).startswith("one Job stopped holding after ")
    assert str(broke.value).endswith("s; value: 2")
