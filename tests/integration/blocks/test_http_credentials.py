"""http.request and http.ready keep a Connection's credentials at its own host.

Two real loopback servers: ``home`` is the connection's base URL, ``elsewhere`` listens on
another port and stands for a host the author would like the token sent to. Every way a
step's ``path`` could point away from home is tried, written out (refused at apply) and
through a param (refused at run time, before anything is sent); ``elsewhere`` must never
see a request, let alone the credentials.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from dirigent.engine.shapes.problems import ProblemsError
from tests.integration.blocks.test_http import connection, pipeline, run_one
from tests.support.harness import Harness
from tests.support.servers import Server

TOKEN = "tok-home-only-5d1c"


@pytest.fixture
async def elsewhere() -> AsyncIterator[Server]:
    """A second loopback server on another port, recording whatever reaches it."""
    srv = Server()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", srv.dispatch)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    srv.url = f"http://127.0.0.1:{port}"
    try:
        yield srv
    finally:
        await runner.cleanup()


async def home_connection(h: Harness, server: Server) -> None:
    await h.apply(connection("api", "http", {"url": f"{server.url}/api/v1", "token": TOKEN}))


def with_where(block: str) -> str:
    """A pipeline whose one step's ``path`` comes from the run's ``where`` param."""
    return f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: steal}}
spec:
  params:
    type: object
    properties: {{where: {{type: string}}}}
  steps:
    call:
      block: {block}
      config: {{connection: api, path: '${{params.where}}'}}
"""


def leaving_paths(elsewhere: Server) -> list[str]:
    host = elsewhere.url.removeprefix("http://")
    return [
        f"{elsewhere.url}/steal",  # an absolute URL
        f"//{host}/steal",  # scheme-relative
        f"///{host}/steal",
        f"\\\\{host}/steal",  # backslashes, which some parsers read as slashes
        f"  {elsewhere.url}/steal",  # leading blanks before an absolute URL
        f"HTTP://{host}/steal",
        f"https://{host}/steal",  # another scheme too
    ]


@pytest.mark.parametrize("index", range(7))
async def test_a_path_leaving_the_connection_is_refused_at_apply(
    h: Harness, server: Server, elsewhere: Server, index: int
) -> None:
    await home_connection(h, server)
    path = leaving_paths(elsewhere)[index]
    doc = pipeline(
        "steal",
        f"""    call:
      block: http.request
      config: {{connection: api, path: {path!r}}}""".replace("'", '"').replace("\\", "\\\\"),
    )
    with pytest.raises(ProblemsError) as refused:
        await h.apply(doc)
    [problem] = refused.value.problems
    assert problem.code == "http.path.host_change"
    assert problem.location.endswith("config.path")
    assert "name another connection" in problem.message


@pytest.mark.parametrize("block", ["http.request", "http.ready"])
@pytest.mark.parametrize("index", range(7))
async def test_a_path_from_a_param_that_leaves_is_refused_before_anything_is_sent(
    h: Harness, server: Server, elsewhere: Server, index: int, block: str
) -> None:
    await home_connection(h, server)
    await h.apply(with_where(block))
    status, [call] = await run_one(h, "steal", {"where": leaving_paths(elsewhere)[index]})
    assert status == "failed"
    assert (call["error_class"], call["error_code"]) == ("rejected", "http.path.host_change")
    assert "name another connection" in call["error_message"]
    assert elsewhere.seen == [] and server.seen == []


async def test_a_redirect_elsewhere_is_an_answer_never_followed(
    h: Harness, server: Server, elsewhere: Server
) -> None:
    async def moved(request: web.Request) -> web.Response:
        raise web.HTTPFound(f"{elsewhere.url}/steal")

    server.routes["/api/v1/moved"] = moved
    await home_connection(h, server)
    await h.apply(
        pipeline("moved", "    call: {block: http.request, config: {connection: api, path: moved}}")
    )
    status, [call] = await run_one(h, "moved")
    assert status == "succeeded", call
    assert call["output"]["status"] == 302
    assert elsewhere.seen == []
    [seen] = server.seen
    assert seen["headers"]["Authorization"] == f"Bearer {TOKEN}"


@pytest.mark.parametrize(
    ("path", "reached"),
    [
        ("items", "/api/v1/items"),
        ("/items", "/api/v1/items"),  # a leading slash stays under the base path
        ("documents:batchGet", "/api/v1/documents:batchGet"),  # a colon is not a scheme
        ("../health", "/api/health"),  # another path on the same host is still home
    ],
)
async def test_paths_that_stay_home_reach_home_with_the_token(
    h: Harness, server: Server, elsewhere: Server, path: str, reached: str
) -> None:
    async def ok(request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    server.routes[reached] = ok
    await home_connection(h, server)
    await h.apply(with_where("http.request"))
    status, [call] = await run_one(h, "steal", {"where": path})
    assert status == "succeeded", call
    [seen] = server.seen
    assert seen["path"] == reached
    assert seen["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert elsewhere.seen == []
