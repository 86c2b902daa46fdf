"""The API refuses cheaply and says why: strangers before bodies, oversized bodies, values
the database cannot store, and a database that is gone (issue 28, point 5)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
import structlog
import yaml

from tests.support.api import TOKEN, Api

BIG = 5 * 1024 * 1024  # over the default DIRIGENT_API_MAX_BODY (4 MiB)
SLOW = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: slow}
spec:
  steps:
    nap: {block: core.sleep, config: {seconds: 60}}
"""


def _problem(response: httpx.Response) -> dict[str, object]:
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, object] = response.json()
    return body


async def test_a_stranger_is_refused_before_the_body_is_read(api: Api) -> None:
    url = f"{api.url}/api/v1/namespaces/default/pipelines/$apply"
    async with httpx.AsyncClient() as http:
        anonymous = await http.post(url, content=b"{" * BIG)
        wrong = await http.post(url, content=b"not json", headers={"Authorization": "Bearer x"})
    # Without the guard FastAPI parses first: the same request answered 422, not 401.
    for refused in (anonymous, wrong):
        assert refused.status_code == 401, refused.text
        assert _problem(refused)["code"] == "auth.unauthenticated"


async def test_a_body_over_the_limit_is_refused_with_413(api: Api) -> None:
    url = f"{api.url}/api/v1/namespaces/default/pipelines/$apply"
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it streams
        for _ in range(BIG // 65536 + 1):
            yield b" " * 65536

    async with httpx.AsyncClient(timeout=30) as http:
        declared = await http.post(url, content=b" " * BIG, headers=headers)
        streamed = await http.post(url, content=chunks(), headers=headers)
    for refused in (declared, streamed):
        assert refused.status_code == 413, refused.text
        problem = _problem(refused)
        assert problem["code"] == "request.too_large"
        assert "DIRIGENT_API_MAX_BODY" in str(problem["detail"])


async def test_a_nul_in_a_cancel_reason_is_a_422_not_a_500(api: Api) -> None:
    await api.client.apply("default", yaml.safe_load(SLOW))
    run = await api.client.run("default", "slow")
    url = f"{api.url}/api/v1/namespaces/default/runs/{run.run_id}/$cancel"
    async with httpx.AsyncClient() as http:
        refused = await http.post(
            url, json={"reason": "stop\u0000now"}, headers={"Authorization": f"Bearer {TOKEN}"}
        )
    assert refused.status_code == 422, refused.text
    assert _problem(refused)["code"] == "request.unstorable"
    assert (await api.client.cancel("default", run.run_id, "plain")).status == "cancelled"


async def test_a_database_that_is_gone_is_a_503_problem_and_no_path_is_logged(api: Api) -> None:
    await api.h.close_engine()  # every connection of the engine's pool is gone at once
    with structlog.testing.capture_logs() as logged:
        async with httpx.AsyncClient() as http:
            gone = await http.get(
                f"{api.url}/api/v1/namespaces/default/runs",
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            hook = await http.post(f"{api.url}/hooks/whsec-planted-token-0042", content=b"{}")
    assert gone.status_code == 503, gone.text
    problem = _problem(gone)
    assert problem["code"] == "engine.unavailable"
    assert str(problem["detail"]).startswith("the database does not answer")
    assert hook.status_code == 503, hook.text
    assert "whsec-planted-token-0042" not in repr(logged)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
