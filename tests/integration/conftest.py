"""Guards every integration test shares."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator

import pytest

from e2e.harness.s3 import ensure_weed, uses_s3
from e2e.harness.s3 import s3_server as s3_server  # a real S3 server (SeaweedFS), per session


def pytest_collection_finish(session: pytest.Session) -> None:
    # A cold build of weed takes minutes: here, before any test's timeout starts.
    if uses_s3(session):
        ensure_weed()


@pytest.fixture
async def _task_guard() -> AsyncIterator[None]:
    before = set(asyncio.all_tasks())
    yield
    # Not a wait for anything: one turn of the loop lets tasks cancelled during teardown
    # finish, so only tasks still running are counted as leaked.
    await asyncio.sleep(0)
    leaked = [
        t for t in asyncio.all_tasks() - before if not t.done() and t is not asyncio.current_task()
    ]
    assert not leaked, f"tasks left running: {leaked}"


@pytest.fixture(autouse=True)
def no_leaked_tasks(request: pytest.FixtureRequest) -> None:
    """Fail an async test that leaves asyncio tasks running: a worker or stream not shut down."""
    if inspect.iscoroutinefunction(request.function):
        request.getfixturevalue("_task_guard")
