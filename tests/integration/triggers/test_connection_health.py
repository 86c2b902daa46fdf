"""``Engine.check_connection``: the kind's ``check()`` against a real loopback server, with the
connection opened (its sealed token reaches the server), and every failure as a reason."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from dirigent.engine.shapes.manifests.loading import parse_manifest, read_text
from tests.support.harness import Harness
from tests.support.servers import serve

Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

CONNECTION = """
apiVersion: dirigent.dev/v1alpha1
kind: Connection
metadata: {{name: api}}
spec:
  type: http
  settings: {{url: "{url}/health"}}
  secrets:
    token: {{name: api-credentials, key: token}}
"""


class Answering:
    """A tiny ASGI app: answers ``status``, records the Authorization header it saw."""

    def __init__(self) -> None:
        self.status = 200
        self.seen: list[str] = []
        self.hold = asyncio.Event()
        self.holding = False

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        headers = dict(scope["headers"])
        self.seen.append(headers.get(b"authorization", b"").decode())
        if self.holding:
            await self.hold.wait()
        await send({"type": "http.response.start", "status": self.status, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


async def apply_connection(h: Harness, url: str) -> None:
    docs, _ = read_text(CONNECTION.format(url=url))
    manifest, problems = parse_manifest(docs[0].data)
    assert manifest is not None, problems
    await h.engine.manifests.apply(manifest, "default", secret_values={"token": "s3cr3t"})


async def test_a_check_opens_the_connection_and_reports_each_way_it_goes(h: Harness) -> None:
    app = Answering()
    async with serve(app) as url:
        await apply_connection(h, url)
        # Healthy: the check reached the server with the token unsealed from the database
        health = await h.engine.connections.check("default", "api", within=5)
        assert health is not None
        assert (health.ok, health.reason) == (True, "Reachable"), health
        assert f"GET {url}/health answered 200" == health.message
        assert app.seen == ["Bearer s3cr3t"]

        # A server error is Unreachable, with what the server answered
        app.status = 503
        health = await h.engine.connections.check("default", "api", within=5)
        assert health is not None and (health.ok, health.reason) == (False, "Unreachable")
        assert "answered 503" in health.message

        # A server that does not answer in time is CheckTimedOut
        app.status, app.holding = 200, True
        health = await h.engine.connections.check("default", "api", within=0.3)
        assert health is not None and (health.ok, health.reason) == (False, "CheckTimedOut")
        app.hold.set()

    # A server that is gone is Unreachable, naming the URL
    health = await h.engine.connections.check("default", "api", within=5)
    assert health is not None and (health.ok, health.reason) == (False, "Unreachable")
    assert f"{url}/health is unreachable" in health.message

    # No such connection: nothing to check
    assert await h.engine.connections.check("default", "nowhere") is None


async def test_stored_settings_that_do_not_fit_the_kind_are_reported(h: Harness) -> None:
    await apply_connection(h, "http://127.0.0.1:9")
    await h.execute("UPDATE connections SET settings = '{}'::jsonb WHERE name = 'api'")
    health = await h.engine.connections.check("default", "api", within=5)
    assert health is not None and (health.ok, health.reason) == (False, "InvalidSettings")
    assert health.message.startswith("url:"), health.message
