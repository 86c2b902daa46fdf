"""Every refusal is a Problem (application/problem+json), whoever refused."""

from __future__ import annotations

import httpx

from dirigent.engine.shapes.views import encode_cursor
from tests.support.api import TOKEN, Api

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def assert_problem(response: httpx.Response, status: int, code: str) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["status"] == status and body["code"] == code, body
    assert set(body) == {
        "type",
        "title",
        "status",
        "detail",
        "code",
        "params",
        "problems",
        "instance",
    }
    assert body["instance"] == response.request.url.path
    return dict(body)


async def test_missing_and_wrong_tokens_are_401_problems(api: Api) -> None:
    async with httpx.AsyncClient(base_url=api.url) as http:
        missing = await http.get("/api/v1/namespaces/default/pipelines")
        wrong = await http.get(
            "/api/v1/namespaces/default/pipelines", headers={"Authorization": "Bearer nope"}
        )
    assert_problem(missing, 401, "auth.unauthenticated")
    assert_problem(wrong, 401, "auth.unauthenticated")
    assert missing.headers["www-authenticate"] == "Bearer"


async def test_unknown_route_wrong_method_and_bad_input_are_problems(api: Api) -> None:
    async with httpx.AsyncClient(base_url=api.url, headers=AUTH) as http:
        unknown = await http.get("/api/v1/nothing/here")
        method = await http.delete("/api/v1/namespaces/default/pipelines")
        invalid = await http.get("/api/v1/namespaces/default/pipelines", params={"limit": 0})
        bad_name = await http.get("/api/v1/namespaces/Not_A_Label/pipelines")
        cursor = await http.get(
            "/api/v1/namespaces/default/pipelines", params={"after": "not-a-cursor"}
        )
        missing_run = await http.get("/api/v1/namespaces/default/runs/999")
    assert_problem(unknown, 404, "route.not_found")
    assert_problem(method, 405, "method.not_allowed")
    body = assert_problem(invalid, 422, "request.invalid")
    assert [p["location"] for p in body["problems"]] == ["query.limit"]  # type: ignore[union-attr]
    assert_problem(bad_name, 422, "request.invalid")
    assert_problem(cursor, 422, "page.cursor.invalid")
    assert_problem(missing_run, 404, "run.not_found")


async def test_health_is_open_and_ready_checks_the_database(api: Api) -> None:
    async with httpx.AsyncClient(base_url=api.url) as http:
        live = await http.get("/health")
        ready = await http.get("/health/ready")
    assert live.json() == {"status": "ok", "checks": {}}
    assert ready.json() == {"status": "ok", "checks": {"database": "ok"}}


async def test_requests_are_counted_by_route_template(api: Api) -> None:
    async with httpx.AsyncClient(base_url=api.url, headers=AUTH) as http:
        for run_id in (1, 2, 3):
            await http.get(f"/api/v1/namespaces/default/runs/{run_id}")
        await http.get("/api/v1/no/such/route")
    sample = api.metrics.registry.get_sample_value
    labels = {
        "route": "/api/v1/namespaces/{namespace}/runs/{run_id}",
        "method": "GET",
        "status": "404",
    }
    assert sample("dirigent_api_requests_total", labels) == 3
    unmatched = {"route": "unmatched", "method": "GET", "status": "404"}
    assert sample("dirigent_api_requests_total", unmatched) == 1
    duration = {"route": labels["route"], "method": "GET"}
    assert sample("dirigent_api_request_duration_seconds_count", duration) == 3


async def test_metrics_are_served_on_their_own_port(api: Api) -> None:
    server = api.metrics.serve(0, addr="127.0.0.1")
    try:
        async with httpx.AsyncClient(base_url=api.url, headers=AUTH) as http:
            await http.get("/api/v1/namespaces/default/pipelines")
            assert (await http.get("/metrics")).status_code == 404  # not on the API's port
        port = server.server_address[1]
        async with httpx.AsyncClient() as http:
            text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
    finally:
        server.shutdown()
        server.server_close()
    wanted = (
        'dirigent_api_requests_total{method="GET",'
        'route="/api/v1/namespaces/{namespace}/pipelines",status="200"} 1.0'
    )
    assert wanted in text


async def test_a_well_formed_cursor_holding_the_wrong_kind_of_key_is_a_422_problem(
    api: Api,
) -> None:
    """A cursor is opaque, but one a client forged from valid base64 JSON must still be
    refused as a Problem, never reach the database as the wrong type (a 500)."""
    base = "/api/v1/namespaces/default"
    name_cursor, id_cursor = encode_cursor("zzz"), encode_cursor(12)
    async with httpx.AsyncClient(
        base_url=api.url, headers={"Authorization": f"Bearer {TOKEN}"}
    ) as http:
        answers = [
            await http.get(f"{base}/runs", params={"after": name_cursor}),
            await http.get(f"{base}/pipelines", params={"after": id_cursor}),
            await http.get(f"{base}/schedules", params={"after": id_cursor}),
            await http.get(f"{base}/connections", params={"after": id_cursor}),
            await http.get("/api/v1/workers", params={"after": id_cursor}),
        ]
        fine = await http.get(f"{base}/pipelines", params={"after": name_cursor})
    for answer in answers:
        assert_problem(answer, 422, "page.cursor.invalid")
    assert fine.status_code == 200 and fine.json() == {"items": [], "next": None}
