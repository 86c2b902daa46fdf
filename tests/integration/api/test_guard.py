"""API tests run under the shared leaked-task guard, not one of their own."""

from __future__ import annotations

import pytest

from tests.support.api import Api


async def test_an_api_test_runs_under_the_shared_guard(
    request: pytest.FixtureRequest, api: Api
) -> None:
    # The guard is the integration conftest's ``_task_guard``, set up before the served API
    # (autouse fixtures come first), so it looks for leaks after the server has stopped.
    assert "_task_guard" in request.fixturenames
    assert api.url.startswith("http://127.0.0.1:")
