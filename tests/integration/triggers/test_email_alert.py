"""An alert delivered for real by email: a failed run's RunFailed rule names the ``email``
notifier and an ``smtp`` Connection; a worker delivers it to an aiosmtpd server on loopback,
which receives one message with the rendered subject, the body and the report's link, and
that link is where the REST API serves the report."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from email import message_from_bytes
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiosmtpd.controller import Controller

from dirigent.api.app import create_app
from dirigent.api.auth import StaticToken
from dirigent.engine.shapes.views import NotificationView
from tests.support.harness import Harness
from tests.support.servers import serve
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

API_TOKEN = "report-reader-token-0123"

CONNECTION = """
apiVersion: dirigent.dev/v1alpha1
kind: Connection
metadata: {{name: mail}}
spec:
  type: smtp
  settings:
    host: 127.0.0.1
    port: {port}
    security: none
    fromAddress: dirigent@example.test
    to: [oncall@example.test, lead@example.test]
"""

PIPELINE = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: nightly}}
spec:
  steps:
    load: {{block: testing.flaky, config: {{needs: {needs}}}}}
  report:
    template: "# {{{{ run.pipeline }}}} {{{{ run.status }}}}"
  alerts:
    - name: mail-oncall
      event: RunFailed
      notifier: email
      connection: mail
      subject: "{{{{ run.pipeline }}}} failed in {{{{ run.failed_step }}}}"
"""


class Mailbox:
    """An SMTP handler keeping every envelope it accepts."""

    def __init__(self) -> None:
        self.envelopes: list[Any] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.envelopes.append(envelope)
        return "250 Message accepted"


@pytest.fixture
def smtp() -> Iterator[tuple[Mailbox, int]]:
    box = Mailbox()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield box, port
    finally:
        controller.stop()


async def test_a_failed_run_is_mailed_to_a_real_smtp_server(
    h: Harness, tmp_path: Path, smtp: tuple[Mailbox, int]
) -> None:
    box, port = smtp
    await h.apply(CONNECTION.format(port=port))
    await h.apply(PIPELINE.format(needs=tmp_path / "never"))
    run = await h.run("nightly")
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "failed"

        async def the_note() -> NotificationView:
            [note] = await h.engine.runs.notifications("default", run.run_id)
            return note

        note = await eventually(
            the_note,
            lambda n: n.status in ("delivered", "failed"),
            timeout=30,
            what="the alert delivered or given up",
        )
    assert note.status == "delivered", note
    [envelope] = box.envelopes  # exactly one message, to the connection's recipients
    assert envelope.mail_from == "dirigent@example.test"
    assert envelope.rcpt_tos == ["oncall@example.test", "lead@example.test"]
    mail = message_from_bytes(envelope.content)
    assert mail["Subject"] == "nightly failed in load"
    payload = mail.get_payload(decode=True)
    assert isinstance(payload, bytes)
    text = payload.decode()
    assert f"Pipeline default/nightly, run {run.run_id}: failed." in text
    assert "Failed step: load" in text
    assert f"/runs/{run.run_id}/report" in text  # the report's link travels with the alert
    messages = [line["message"] for line in await h.logs(run.run_id)]
    assert any("alert mail-oncall delivered" in m for m in messages)

    # The link in the mail is where the REST API serves the run's report.
    link = next(line for line in text.splitlines() if "/report" in line).split()[-1]
    app = create_app(h.engine, auth=StaticToken(API_TOKEN))
    async with serve(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as client:
        auth = {"Authorization": f"Bearer {API_TOKEN}"}
        report = await client.get(link, headers=auth)
        assert report.status_code == 200, report.text
        assert report.headers["content-type"].startswith("text/markdown")
        assert report.text == "# nightly failed"
        other = await client.get(
            f"/api/v1/namespaces/elsewhere/runs/{run.run_id}/report", headers=auth
        )
        assert other.status_code == 404, other.text
        assert (await client.get(link)).status_code == 401
