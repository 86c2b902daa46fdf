"""Triggers in ``dirigent dev``: a folder's Schedule fires, and its Webhook's minted token
(under ``.dirigent/secrets/``) starts a run through the printed URL, signed with the HMAC
secret a Secret document in the same folder holds. A real subprocess on a real port."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.dev import Dev, Record
from tests.support.servers import free_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

TOKEN = "dev-triggers-token-0123"
HMAC_KEY = "shared-signing-key"
FOLDER = f"""apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: greet}}
spec:
  params:
    type: object
    properties: {{word: {{type: string, default: tick}}}}
  steps:
    say: {{block: core.echo, config: {{value: "${{params.word}}"}}}}
---
apiVersion: dirigent.dev/v1alpha1
kind: Schedule
metadata: {{name: every-second}}
spec: {{pipeline: greet, interval: 1s, params: {{word: scheduled}}}}
---
apiVersion: dirigent.dev/v1alpha1
kind: Webhook
metadata: {{name: inbound}}
spec:
  pipeline: greet
  paramsFromPayload: {{word: "$.word"}}
  hmacSecretRef: {{name: signing, key: key}}
---
apiVersion: v1
kind: Secret
metadata: {{name: signing}}
stringData: {{key: {HMAC_KEY}}}
"""


@pytest.fixture
def dev(tmp_path: Path, state: Path) -> Iterator[Dev]:
    folder = tmp_path / "manifests"
    folder.mkdir()
    (folder / "triggers.yaml").write_text(FOLDER)
    running = Dev(folder, state, free_port(), TOKEN)
    yield running
    running.stop()


def waited(probe: Callable[[], list[Record]], *, what: str, timeout: float = 60) -> list[Record]:
    """``probe`` until it finds something, or fail at the deadline with its last answer."""
    return wait_until(probe, timeout=timeout, every=0.2, what=what)


def runs(url: str, **query: str) -> list[Record]:
    answer = httpx.get(
        f"{url}/api/v1/namespaces/default/runs",
        params={"pipeline": "greet", **query},
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    items: list[Record] = answer.json()["items"]
    return items


def test_a_schedule_fires_and_a_minted_webhook_token_starts_a_run(dev: Dev, state: Path) -> None:
    minted = dev.expect(lambda r: r["kind"] == "token")
    ready = dev.expect(lambda r: r["kind"] == "ready")
    url = ready["url"]
    applied = {(r["manifest"], r["name"]) for r in dev.seen if r["kind"] == "applied"}
    assert applied == {("Pipeline", "greet"), ("Schedule", "every-second"), ("Webhook", "inbound")}

    # The interval Schedule fires within a few of its seconds, and the run succeeds.
    scheduled = waited(
        lambda: [r for r in runs(url, trigger="schedule") if r["status"] == "succeeded"],
        what="a succeeded run started by the Schedule",
    )
    assert scheduled[0]["triggered_by_kind"] == "schedule"

    # The Webhook's token was minted under .dirigent/secrets/ and printed as a path.
    token_file = Path(minted["file"])
    assert token_file.parent == state / "secrets"
    token = token_file.read_text().strip()
    assert minted["path"] == f"/hooks/{token}"

    body = json.dumps({"word": "hello"}).encode()
    signature = hmac.new(HMAC_KEY.encode(), body, hashlib.sha256).hexdigest()
    headers = {"Content-Type": "application/json"}
    # A wrong token is refused with a Problem; so is a right token with a wrong signature.
    wrong = httpx.post(
        f"{url}/hooks/not-{token}",
        content=body,
        headers={**headers, "X-Dirigent-Signature": f"sha256={signature}"},
        timeout=10,
    )
    assert wrong.status_code == 404 and wrong.json()["code"] == "webhook.not_found", wrong.text
    unsigned = httpx.post(
        f"{url}/hooks/{token}",
        content=body,
        headers={**headers, "X-Dirigent-Signature": "sha256=" + "0" * 64},
        timeout=10,
    )
    assert unsigned.status_code == 401 and unsigned.json()["code"] == "webhook.signature.invalid"
    assert runs(url, trigger="webhook") == []

    # The token and a right signature start a run with the mapped param.
    answer = httpx.post(
        f"{url}/hooks/{token}",
        content=body,
        headers={**headers, "X-Dirigent-Signature": f"sha256={signature}"},
        timeout=10,
    )
    assert answer.status_code == 202, answer.text
    run_id = answer.json()["runId"]
    done = waited(
        lambda: [r for r in runs(url, trigger="webhook") if r["status"] == "succeeded"],
        what=f"webhook run {run_id} succeeded",
    )
    assert [r["id"] for r in done] == [run_id]
    assert dev.stop() == 0
