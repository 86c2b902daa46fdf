"""http.request, http.ready and webhook.post through real runs against a loopback server."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json

import pytest
from aiohttp import web

from dirigent.engine.shapes.problems import ProblemsError
from tests.support.harness import Harness
from tests.support.servers import Server


def pipeline(name: str, steps: str) -> str:
    return f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: {name}}}
spec:
  steps:
{steps}
"""


def connection(name: str, kind: str, settings: dict[str, object]) -> str:
    return f"""
apiVersion: dirigent.dev/v1alpha1
kind: Connection
metadata: {{name: {name}}}
spec:
  type: {kind}
  settings: {json.dumps(settings)}
"""


async def run_one(
    h: Harness, name: str, params: dict[str, object] | None = None
) -> tuple[str, list[dict[str, object]]]:
    run = await h.run(name, params)
    async with h.workers(1, heartbeat=dt.timedelta(milliseconds=200)):
        status = await h.until_finished(run.run_id)
    return status, await h.attempts(run.run_id)


async def test_a_request_through_a_connection_sends_auth_headers_query_and_json(
    h: Harness, server: Server
) -> None:
    async def echo(request: web.Request) -> web.Response:
        return web.json_response({"got": await request.json()}, status=201)

    server.routes["/api/v1/items"] = echo
    await h.apply(
        connection(
            "api",
            "http",
            {"url": f"{server.url}/api/v1", "headers": {"X-Team": "data"}, "username": "u"},
        )
    )
    await h.apply(
        pipeline(
            "call",
            """    call:
      block: http.request
      config: {connection: api, path: items, method: POST, query: {page: 2}, json: {a: 1}}""",
        )
    )
    status, [call] = await run_one(h, "call")
    assert status == "succeeded", call
    assert call["output"]["status"] == 201
    assert call["output"]["json"] == {"got": {"a": 1}}
    [seen] = server.seen
    assert seen["query"] == {"page": "2"}
    assert seen["headers"]["X-Team"] == "data"
    assert seen["headers"]["Authorization"].startswith("Basic ")


@pytest.mark.parametrize(
    ("status", "error_class"), [(503, "transient"), (404, "rejected"), (429, "transient")]
)
async def test_status_codes_are_classified_honestly(
    h: Harness, server: Server, status: int, error_class: str
) -> None:
    async def answer(request: web.Request) -> web.Response:
        return web.Response(status=status, text="nope", headers={"Retry-After": "600"})

    server.routes["/x"] = answer
    await h.apply(
        pipeline("call", f"    call: {{block: http.request, config: {{url: '{server.url}/x'}}}}")
    )
    result, [call] = await run_one(h, "call")
    assert result == "failed"
    assert (call["error_class"], call["error_code"]) == (error_class, "http.status")
    assert call["error_params"]["status"] == status


async def test_a_short_retry_after_is_waited_out_within_the_attempt(
    h: Harness, server: Server
) -> None:
    calls = []

    async def limited(request: web.Request) -> web.Response:
        calls.append(1)
        if len(calls) == 1:
            return web.Response(status=429, headers={"Retry-After": "0"})
        return web.json_response({"ok": True})

    server.routes["/x"] = limited
    await h.apply(
        pipeline("call", f"    call: {{block: http.request, config: {{url: '{server.url}/x'}}}}")
    )
    status, _ = await run_one(h, "call")
    assert status == "succeeded"
    assert len(calls) == 2


async def test_a_body_above_max_inline_goes_to_storage(h: Harness, server: Server) -> None:
    big = b"x" * 5000

    async def large(request: web.Request) -> web.Response:
        return web.Response(body=big, content_type="text/plain")

    server.routes["/big"] = large
    await h.apply(
        pipeline(
            "call",
            f"    call: {{block: http.request, config: {{url: '{server.url}/big', maxInline: 1kb}}}}",
        )
    )
    status, [call] = await run_one(h, "call")
    assert status == "succeeded"
    out = call["output"]
    assert out["size"] == 5000 and len(out["text"]) == 1024
    assert await h.storage.read_bytes(out["body_uri"]) == big


async def test_a_timeout_is_transient(h: Harness, server: Server) -> None:
    import asyncio

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(2)  # the slowness is the thing under test: past the step's timeout
        return web.Response(text="late")

    server.routes["/slow"] = slow
    await h.apply(
        pipeline(
            "call",
            f"    call: {{block: http.request, config: {{url: '{server.url}/slow', timeout: 200ms}}}}",
        )
    )
    status, [call] = await run_one(h, "call")
    assert (status, call["error_class"], call["error_code"]) == (
        "failed",
        "transient",
        "http.timeout",
    )


async def test_a_relative_url_and_a_double_target_are_refused_at_apply(h: Harness) -> None:
    with pytest.raises(ProblemsError) as refused:
        await h.apply(pipeline("bad", "    call: {block: http.request, config: {url: /relative}}"))
    assert [p.code for p in refused.value.problems] == ["http.url.relative"]


async def test_http_ready_waits_for_the_status_and_the_condition(
    h: Harness, server: Server
) -> None:
    answers = iter([(503, {}), (200, {"state": "starting"}), (200, {"state": "up"})])

    async def health(request: web.Request) -> web.Response:
        code, body = next(answers, (200, {"state": "up"}))
        return web.json_response(body, status=code)

    server.routes["/health"] = health
    await h.apply(
        pipeline(
            "wait",
            f"""    ready:
      block: http.ready
      poll: 100ms
      config: {{url: '{server.url}/health', condition: '.state == "up"'}}""",
        )
    )
    status, [ready] = await run_one(h, "wait")
    assert status == "succeeded"
    assert ready["output"] == {"status": 200, "json": {"state": "up"}}
    assert len(server.seen) >= 3


async def test_webhook_post_signs_the_exact_body_with_hmac(h: Harness, server: Server) -> None:
    async def receive(request: web.Request) -> web.Response:
        return web.Response(status=204)

    server.routes["/hook"] = receive
    await h.apply(connection("hook", "webhook", {"url": f"{server.url}/hook", "secret": "k3y"}))
    await h.apply(
        pipeline(
            "post",
            "    post: {block: webhook.post, config: {connection: hook, payload: {run: '${run.id}'}}}",
        )
    )
    status, [post] = await run_one(h, "post")
    assert status == "succeeded", post
    [seen] = server.seen
    expected = "sha256=" + hmac.new(b"k3y", seen["body"], hashlib.sha256).hexdigest()
    assert seen["headers"]["X-Dirigent-Signature"] == expected
    assert json.loads(seen["body"]) == {"run": post["run_id"]}


@pytest.mark.parametrize(("code", "error_class"), [(400, "rejected"), (503, "transient")])
async def test_webhook_post_refused_by_the_receiver_fails_with_its_code(
    h: Harness, server: Server, code: int, error_class: str
) -> None:
    async def refuse(request: web.Request) -> web.Response:
        return web.Response(status=code, text="no thanks")

    server.routes["/hook"] = refuse
    await h.apply(connection("hook", "webhook", {"url": f"{server.url}/hook"}))
    await h.apply(
        pipeline("post", "    post: {block: webhook.post, config: {connection: hook, payload: {}}}")
    )
    status, [post] = await run_one(h, "post")
    assert status == "failed"
    assert (post["error_class"], post["error_code"]) == (error_class, "webhook.status")
    message = str(post["error_message"])
    assert f"answered {code}: no thanks" in message and "Traceback" not in message
