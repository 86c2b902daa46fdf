"""Connection kinds' health checks and the notifiers, against real servers on loopback."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import logging
import socket
from collections.abc import Iterator
from email import message_from_bytes
from typing import Any

import pytest
import structlog
from aiohttp import web
from aiosmtpd.controller import Controller
from pydantic import SecretStr

from dirigent.blocks.connections import (
    HttpConnection,
    HttpConnectionKind,
    KubernetesConnection,
    KubernetesConnectionKind,
    PostgresConnection,
    PostgresConnectionKind,
    SlackConnection,
    SlackConnectionKind,
    SmtpConnection,
    SmtpConnectionKind,
    WebhookConnection,
    WebhookConnectionKind,
)
from dirigent.blocks.notifiers import EmailNotifier, LogNotifier, SlackNotifier, WebhookNotifier
from dirigent.engine import configure_logging
from dirigent.sdk import BlockFailure, ErrorClass, NotificationMessage
from tests.support.postgres import plain_dsn
from tests.support.servers import Server

ALERT = NotificationMessage(
    event="run_failed",
    title="nightly failed",
    body="step load failed: 503",
    severity="error",
    namespace="data",
    pipeline="nightly",
    run_id=7,
    links={"run": "https://dirigent.example/runs/7"},
)


class Mailbox:
    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: Any
    ) -> str:
        if address.startswith("nobody@"):
            return "550 no such user"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(envelope)
        return "250 Message accepted"


@pytest.fixture
def smtp() -> Iterator[tuple[Mailbox, int]]:
    box = Mailbox()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield box, port
    finally:
        controller.stop()


def smtp_config(port: int, to: list[str]) -> SmtpConnection:
    return SmtpConnection(
        host="127.0.0.1", port=port, security="none", from_address="dirigent@example.test", to=to
    )


async def test_email_delivers_one_plain_text_message(smtp: tuple[Mailbox, int]) -> None:
    box, port = smtp
    await EmailNotifier().send(ALERT, smtp_config(port, ["ops@example.test"]))
    [envelope] = box.messages
    assert envelope.rcpt_tos == ["ops@example.test"]
    mail = message_from_bytes(envelope.content)
    assert mail["Subject"] == "nightly failed"
    assert "step load failed: 503" in mail.get_payload()
    assert "https://dirigent.example/runs/7" in mail.get_payload()


async def test_email_raises_when_the_server_refuses(smtp: tuple[Mailbox, int]) -> None:
    _, port = smtp
    with pytest.raises(Exception, match=r"nobody@example\.test"):
        await EmailNotifier().send(ALERT, smtp_config(port, ["nobody@example.test"]))


async def test_smtp_check_reaches_the_server_and_reports_a_closed_port(
    smtp: tuple[Mailbox, int],
) -> None:
    _, port = smtp
    assert (await SmtpConnectionKind().check(smtp_config(port, []))).ok
    closed = await SmtpConnectionKind().check(smtp_config(1, []))
    assert not closed.ok and "127.0.0.1:1" in (closed.message or "")


async def test_webhook_notifier_posts_signed_json_and_raises_on_a_500(server: Server) -> None:
    codes = iter([200, 500])

    async def hook(request: web.Request) -> web.Response:
        return web.Response(status=next(codes))

    server.routes["/alerts"] = hook
    conn = WebhookConnection(url=f"{server.url}/alerts", secret=SecretStr("s"))
    await WebhookNotifier().send(ALERT, conn)
    seen = server.seen[0]
    assert json.loads(seen["body"])["title"] == "nightly failed"
    assert seen["headers"]["X-Dirigent-Signature"] == (
        "sha256=" + hmac.new(b"s", seen["body"], hashlib.sha256).hexdigest()
    )
    with pytest.raises(BlockFailure) as failed:
        await WebhookNotifier().send(ALERT, conn)
    assert failed.value.error_class is ErrorClass.TRANSIENT


async def test_slack_notifier_posts_text_and_raises_on_refusal(server: Server) -> None:
    codes = iter([200, 403])

    async def slack(request: web.Request) -> web.Response:
        return web.Response(status=next(codes), text="ok")

    server.routes["/services/T/B/X"] = slack
    conn = SlackConnection(webhook_url=SecretStr(f"{server.url}/services/T/B/X"))
    await SlackNotifier().send(ALERT, conn)
    assert "*nightly failed*" in json.loads(server.seen[0]["body"])["text"]
    with pytest.raises(BlockFailure) as failed:
        await SlackNotifier().send(ALERT, conn)
    assert failed.value.error_class is ErrorClass.REJECTED


@pytest.fixture
def process_logging() -> Iterator[None]:
    """Restores the process's logging after a test that configured it as a process does."""
    root = logging.getLogger()
    handlers, level, config = root.handlers[:], root.level, structlog.get_config()
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        structlog.configure(**config)


@pytest.mark.parametrize("level", [None, "info", "warning", "error"])
async def test_log_notifier_writes_the_alert_as_one_line_of_the_process_log(
    level: str | None, capsys: pytest.CaptureFixture[str], process_logging: None
) -> None:
    # The worker's logging as a `dirigent worker` in a container configures it (JSON), on the
    # stderr this test captures.
    configure_logging("json")
    config = LogNotifier.config_model.model_validate({"level": level} if level else {})
    await LogNotifier().send(ALERT, config)  # needs nothing: no connection, no credential
    [line] = capsys.readouterr().err.splitlines()
    record = json.loads(line)
    written_at = dt.datetime.fromisoformat(record.pop("timestamp"))
    assert written_at.utcoffset() == dt.timedelta(0)
    assert abs(dt.datetime.now(dt.UTC) - written_at) < dt.timedelta(minutes=1)
    assert record == {
        "event": "nightly failed",
        "event_kind": "run_failed",
        "body": "step load failed: 503",
        "namespace": "data",
        "pipeline": "nightly",
        "run_id": 7,
        "level": level or "warning",
        "logger": "dirigent.notify",
    }


async def test_http_webhook_and_slack_checks(server: Server) -> None:
    async def root(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != "Bearer t":
            return web.Response(status=401)
        return web.Response(text="hi")

    async def post_only(request: web.Request) -> web.Response:
        return web.Response(status=405 if request.method != "POST" else 204)

    async def slack(request: web.Request) -> web.Response:
        return web.Response(status=400, text="no_text")

    server.routes.update({"/": root, "/hook": post_only, "/slack": slack})
    assert (
        await HttpConnectionKind().check(HttpConnection(url=server.url + "/", token=SecretStr("t")))
    ).ok
    assert not (await HttpConnectionKind().check(HttpConnection(url=server.url + "/"))).ok
    assert (await WebhookConnectionKind().check(WebhookConnection(url=server.url + "/hook"))).ok
    assert (
        await SlackConnectionKind().check(
            SlackConnection(webhook_url=SecretStr(server.url + "/slack"))
        )
    ).ok
    gone = await SlackConnectionKind().check(
        SlackConnection(webhook_url=SecretStr(server.url + "/revoked"))
    )
    assert not gone.ok


async def test_postgres_check_runs_select_one(db_url: str) -> None:
    dsn = plain_dsn(db_url)
    assert (await PostgresConnectionKind().check(PostgresConnection(dsn=SecretStr(dsn)))).ok
    wrong = dsn.rsplit("/", 1)[0] + "/no_such_database"
    assert not (await PostgresConnectionKind().check(PostgresConnection(dsn=SecretStr(wrong)))).ok


async def test_kubernetes_check_reports_an_unreachable_api_server() -> None:
    kubeconfig = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""
    report = await KubernetesConnectionKind().check(
        KubernetesConnection(kubeconfig=SecretStr(kubeconfig))
    )
    assert not report.ok and "unreachable" in (report.message or "")
