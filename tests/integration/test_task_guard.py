"""The shared leaked-task guard (``tests/integration/conftest.py``) can fail, and it does for a
test that leaves an asyncio task running."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ("pytester",)

GUARD = Path(__file__).with_name("conftest.py")


def test_the_guard_fails_a_test_that_leaves_a_task_running(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(GUARD.read_text())
    pytester.makeini(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
    )
    pytester.makepyfile(
        test_leak="""
import asyncio

async def test_leaves_a_task_running():
    asyncio.get_running_loop().create_task(asyncio.sleep(3600))

async def test_cleans_up():
    task = asyncio.get_running_loop().create_task(asyncio.sleep(3600))
    task.cancel()
"""
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_leaves_a_task_running*"])
    result.stdout.fnmatch_lines(["*tasks left running*"])
