"""A Connection's secret values never come back out: a known value is planted in each failure
path a block owns, and every row of the database and everything the process printed is
searched for it.

The paths: a server echoing the request (bearer token, basic credential) in an error body
and in a successful answer; a Connection whose fields do not fit its kind's model (a secret
under a field the kind does not have; a model-level refusal, whose input is the whole
connection); a health check that fails (a Slack webhook URL is itself the credential; a
kubeconfig text that does not parse quotes the line it stopped at).

A Connection the door refuses is also stored underneath it, through the store's
``apply_connection``, as a row stored before that check would be: the runtime's own refusal
of such a row is one of the paths.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from dirigent.engine import EngineSettings, ProblemsError
from dirigent.engine.infrastructure.crypto import SecretSealer
from dirigent.engine.shapes.manifests import parse_manifest
from dirigent.engine.store.pool import in_transaction
from dirigent.engine.store.transactions.connections import apply_connection as store_connection
from tests.integration.blocks.test_http import pipeline, run_one
from tests.support.harness import Harness, harness
from tests.support.servers import Server

SECRET = "planted-s3cret-7c41e0"


@pytest.fixture
async def h(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Harness]:
    """The blocks' harness, with a key to seal connection secrets as the operator does."""
    monkeypatch.setenv("DIRIGENT_SECRET_KEY", "0" * 64)
    async with harness(db_url, tmp_path / "artifacts", unsafe=("docker.run",)) as found:
        yield found


async def apply_connection(
    h: Harness, name: str, kind: str, settings: dict[str, Any], secrets: dict[str, str]
) -> None:
    """A Connection whose secret fields arrive as the operator hands them over: sealed."""
    doc = {
        "apiVersion": "dirigent.dev/v1alpha1",
        "kind": "Connection",
        "metadata": {"name": name},
        "spec": {
            "type": kind,
            "settings": settings,
            "secrets": {field: {"name": name, "key": field} for field in secrets},
        },
    }
    manifest, problems = parse_manifest(doc)
    assert manifest is not None, problems
    refused: list[ProblemsError] = []
    try:
        await h.engine.manifests.apply(manifest, h.namespace, secret_values=secrets)
    except ProblemsError as err:
        refused.append(err)
    if not refused:
        return
    # The door refuses a Connection its kind does not accept, never quoting a value...
    assert {p.code for p in refused[0].problems} == {"connection.settings.invalid"}
    assert_nowhere(repr(refused[0].problems), secrets=tuple(secrets.values()))
    # ...but a row stored before that check, or whose kind changed since, still reaches the
    # runtime: store it underneath the door, as such a row would be, to prove that path too.
    sealer = SecretSealer.from_settings(EngineSettings())
    await in_transaction(
        h.pool,
        lambda c: store_connection(
            c, manifest, namespace=h.namespace, secret_values=secrets, sealer=sealer
        ),
    )


async def everything_stored(h: Harness, holding: str) -> str:
    """Every row of every table, as text: runs, attempts, logs, events, notifications...

    ``holding`` must be in it (an error code the run recorded): the search reads real rows.
    """
    async with h.pool.acquire() as conn:
        tables = await conn.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        )
        dumps = [
            await conn.fetchval(
                f"SELECT coalesce(string_agg(to_jsonb(t)::text, E'\\n'), '') FROM \"{name}\" t"
            )
            for name in (r["table_name"] for r in tables)
        ]
    text = "\n".join(dumps)
    assert holding in text
    return text


def assert_nowhere(*texts: str, secrets: tuple[str, ...] = (SECRET,)) -> None:
    for text in texts:
        for secret in secrets:
            at = text.find(secret)
            assert at < 0, f"{secret!r} leaked: ...{text[max(at - 300, 0) : at + 100]}..."


async def echo_request(request: web.Request) -> web.Response:
    """A server that quotes the request back, as debugging endpoints and some errors do."""
    quoted = {"headers": dict(request.headers), "body": await request.text()}
    status = 200 if request.query.get("ok") else 400
    return web.json_response(quoted, status=status)


@pytest.mark.parametrize(
    ("auth", "sent"),
    [
        ({"token": SECRET}, SECRET),
        ({"password": SECRET}, base64.b64encode(f"me:{SECRET}".encode()).decode()),
    ],
)
async def test_an_error_body_echoing_the_credentials_is_redacted(
    h: Harness, server: Server, capfd: pytest.CaptureFixture[str], auth: dict[str, str], sent: str
) -> None:
    server.routes["/api/echo"] = echo_request
    settings = {"url": f"{server.url}/api", **({"username": "me"} if "password" in auth else {})}
    await apply_connection(h, "api", "http", settings, auth)
    await h.apply(
        pipeline("echo", "    call: {block: http.request, config: {connection: api, path: echo}}")
    )
    status, [call] = await run_one(h, "echo")
    assert (status, call["error_code"]) == ("failed", "http.status")
    assert sent in server.seen[0]["headers"]["Authorization"]  # it was sent, and echoed
    assert "[redacted]" in call["error_message"]
    printed = capfd.readouterr()
    stored = await everything_stored(h, "http.status")
    assert_nowhere(stored, printed.out, printed.err, secrets=(SECRET, sent))


async def test_a_successful_answer_echoing_the_token_is_redacted_in_the_output(
    h: Harness, server: Server, capfd: pytest.CaptureFixture[str]
) -> None:
    server.routes["/api/echo"] = echo_request
    await apply_connection(h, "api", "http", {"url": f"{server.url}/api"}, {"token": SECRET})
    await h.apply(
        pipeline(
            "echo",
            "    call: {block: http.request, config: {connection: api, path: echo, query: {ok: 1}}}",
        )
    )
    status, [call] = await run_one(h, "echo")
    assert status == "succeeded", call
    assert call["output"]["json"]["headers"]["Authorization"] == "Bearer [redacted]"
    printed = capfd.readouterr()
    stored = await everything_stored(h, "[redacted]")
    assert_nowhere(stored, printed.out, printed.err)


async def test_a_secret_under_a_field_the_kind_does_not_have_stays_out_of_the_error(
    h: Harness, server: Server, capfd: pytest.CaptureFixture[str]
) -> None:
    await apply_connection(h, "api", "http", {"url": server.url}, {"apiKey": SECRET})
    await h.apply(
        pipeline("misfit", "    call: {block: http.request, config: {connection: api, path: x}}")
    )
    status, [call] = await run_one(h, "misfit")
    assert (status, call["error_code"]) == ("failed", "engine.connection.unavailable")
    assert "apiKey" in call["error_message"]  # says which field does not fit
    assert server.seen == []
    printed = capfd.readouterr()
    stored = await everything_stored(h, "engine.connection.unavailable")
    assert_nowhere(stored, printed.out, printed.err)


async def test_a_model_level_refusal_does_not_quote_the_whole_connection(
    h: Harness, capfd: pytest.CaptureFixture[str]
) -> None:
    # Two ways to reach one cluster: the kind's own check refuses, and pydantic's error
    # input for a model-level check is the whole connection, secrets opened.
    await apply_connection(
        h,
        "k8s",
        "kubernetes",
        {"server": "https://127.0.0.1:6443"},
        {"token": SECRET, "kubeconfig": f"users: [{{name: u, user: {{token: {SECRET}}}}}]"},
    )
    await h.apply(
        pipeline("misfit", "    job: {block: docker.run, config: {image: x, cluster: k8s}}")
    )
    run = await h.run("misfit")
    async with h.workers(
        1, heartbeat=dt.timedelta(milliseconds=200), enabled_unsafe={"docker.run"}
    ):
        assert await h.until_finished(run.run_id) == "failed"
    [job] = await h.attempts(run.run_id)
    assert job["error_code"] == "engine.connection.unavailable"
    assert "give one way to reach the cluster" in job["error_message"]
    printed = capfd.readouterr()
    stored = await everything_stored(h, job["error_code"])
    assert_nowhere(stored, printed.out, printed.err)


async def test_a_failing_slack_check_never_names_the_webhook_url(h: Harness) -> None:
    url = f"http://127.0.0.1:1/services/T0/B0/{SECRET}"  # a closed port: unreachable
    await apply_connection(h, "alerts", "slack", {}, {"webhookUrl": url})
    health = await h.engine.connections.check(h.namespace, "alerts")
    assert health is not None and health.ok is False
    assert "unreachable" in health.message
    assert_nowhere(health.message)


async def test_a_kubeconfig_that_does_not_parse_is_not_quoted_by_the_check(h: Harness) -> None:
    text = f"apiVersion: v1\nusers:\n- name: u\n  user: {{token: {SECRET}\n"
    await apply_connection(h, "k8s", "kubernetes", {}, {"kubeconfig": text})
    health = await h.engine.connections.check(h.namespace, "k8s")
    assert health is not None and health.ok is False
    assert "not valid YAML (line" in health.message
    assert_nowhere(health.message, json.dumps(health.__dict__))


async def test_a_large_echo_is_redacted_in_storage_and_where_the_inline_part_is_cut(
    h: Harness, server: Server, capfd: pytest.CaptureFixture[str]
) -> None:
    async def big_echo(request: web.Request) -> web.Response:
        token = request.headers["Authorization"].removeprefix("Bearer ")
        # The first copy straddles the 1 KiB kept inline; more copies further on.
        body = "x" * 1016 + token + ("y" * 3000 + token) * 3
        return web.Response(text=body)

    server.routes["/api/big"] = big_echo
    await apply_connection(h, "api", "http", {"url": f"{server.url}/api"}, {"token": SECRET})
    await h.apply(
        pipeline(
            "big",
            "    call: {block: http.request, config: {connection: api, path: big, maxInline: 1kb}}",
        )
    )
    status, [call] = await run_one(h, "big")
    assert status == "succeeded", call
    out = call["output"]
    assert out["body_uri"] and out["size"] == 1016 + 4 * len(SECRET) + 3 * 3000
    assert SECRET[:8] not in out["text"]  # not even the part before the cut
    stored = (await h.storage.read_bytes(out["body_uri"])).decode()
    assert stored.count("[redacted]") == 4
    printed = capfd.readouterr()
    assert_nowhere(stored, await everything_stored(h, out["body_uri"]), printed.out, printed.err)
