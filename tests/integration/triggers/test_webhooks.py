"""Webhook intake over real HTTP on loopback: every refusal, a fuzz, every delivery to a webhook
recorded, strangers counted and sampled, old deliveries pruned."""

from __future__ import annotations

import hashlib
import hmac
import json
import random
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from dirigent.api.routes.hooks import hooks_router
from dirigent.engine import ProblemsError
from tests.support.harness import Harness
from tests.support.servers import serve

TOKEN = "tok-" + "a1b2c3d4" * 6
SECRET = "s3cret-hmac-key"

PIPELINE = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: ingest}}
spec:
  concurrency: {concurrency}
  params:
    type: object
    required: [order]
    properties:
      order: {{type: integer}}
      region: {{type: string, default: north}}
    additionalProperties: false
  steps:
    a: {{block: testing.record, config: {{path: {path}}}}}
"""

WEBHOOK = """
apiVersion: dirigent.dev/v1alpha1
kind: Webhook
metadata: {{name: {name}}}
spec:
  pipeline: ingest
  paramsFromPayload: {{order: $.order.id, region: $.where}}
{extra}
"""


def sign(body: bytes, secret: str = SECRET) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@pytest.fixture
async def client(h: Harness) -> AsyncIterator[httpx.AsyncClient]:
    app = FastAPI()
    app.include_router(hooks_router(h.engine))
    async with serve(app) as base, httpx.AsyncClient(base_url=base, timeout=30) as c:
        yield c


async def setup(h: Harness, tmp_path: Path, extra: str = "", concurrency: str = "Allow") -> None:
    await h.apply(PIPELINE.format(path=tmp_path / "rec", concurrency=concurrency))
    await apply_hook(h, "orders", extra, {"token": TOKEN, "hmacSecret": SECRET})


async def apply_hook(h: Harness, name: str, extra: str, secrets: dict[str, str]) -> str:
    from dirigent.engine.shapes.manifests.loading import parse_manifest, read_text

    docs, _ = read_text(WEBHOOK.format(name=name, extra=extra))
    manifest, problems = parse_manifest(docs[0].data)
    assert manifest is not None, problems
    return (await h.engine.manifests.apply(manifest, "default", secret_values=secrets)).action


async def deliveries(h: Harness) -> list[tuple[int, str, str | None]]:
    async with h.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT status_code, result, reason FROM webhook_deliveries ORDER BY id"
        )
    return [(r["status_code"], r["result"], r["reason"]) for r in rows]


async def test_an_accepted_delivery_starts_a_run_with_mapped_params(
    h: Harness, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    await setup(h, tmp_path)
    answer = await client.post(f"/hooks/{TOKEN}", json={"order": {"id": 42}, "where": "south"})
    assert answer.status_code == 202, answer.text
    run_id = answer.json()["runId"]
    row = await h.fetchval(
        "SELECT row(params::text, triggered_by_kind, triggered_by_ref) FROM runs WHERE id = $1",
        run_id,
    )
    assert row == ('{"order": 42, "region": "south"}', "webhook", "orders")
    assert await deliveries(h) == [(202, "accepted", None)]
    delivered = await h.fetchval("SELECT run_id FROM webhook_deliveries")
    assert delivered == run_id
    view = await h.engine.triggers.webhook("default", "orders")
    assert view is not None and view.last_delivery_result == "accepted"
    assert view.path == f"/hooks/{TOKEN[:8]}…" and TOKEN not in view.path
    # The token is stored only as its hash.
    stored = await h.fetchval("SELECT row(token_hash, token_prefix, hmac_secret) FROM webhooks")
    assert stored[0] == hashlib.sha256(TOKEN.encode()).hexdigest()
    assert stored[2] is None  # no HMAC declared


async def test_every_refusal_path_is_answered_and_recorded(
    h: Harness, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    hmac_ref = (
        "  hmacSecretRef: {name: orders-hmac, key: hmac}\n  rateLimit: {perMinute: 6, burst: 4}"
    )
    await setup(h, tmp_path, extra=hmac_ref, concurrency="Skip")
    good = json.dumps({"order": {"id": 1}}).encode()

    async def post(path: str, body: bytes, **headers: str) -> httpx.Response:
        return await client.post(path, content=body, headers=headers)

    unknown = await post("/hooks/not-a-token-at-all-123", good)
    assert unknown.status_code == 404
    assert unknown.json()["code"] == "webhook.not_found"
    missing = await post(f"/hooks/{TOKEN}", good)
    assert (missing.status_code, missing.json()["code"]) == (401, "webhook.signature.missing")
    wrong = await post(f"/hooks/{TOKEN}", good, **{"X-Dirigent-Signature": sign(b"other")})
    assert (wrong.status_code, wrong.json()["code"]) == (401, "webhook.signature.invalid")
    # The signature is over the raw bytes: a re-serialised body does not match.
    spaced = b'{"order":  {"id": 1}}'
    resigned = await post(f"/hooks/{TOKEN}", spaced, **{"X-Dirigent-Signature": sign(good)})
    assert resigned.status_code == 401
    ok = await post(f"/hooks/{TOKEN}", good, **{"X-Dirigent-Signature": "sha256=" + sign(good)})
    assert ok.status_code == 202, ok.text
    # Rate limit: the burst of 4 is spent (three refusals above count, they were read).
    limited = await post(f"/hooks/{TOKEN}", good, **{"X-Dirigent-Signature": sign(good)})
    assert (limited.status_code, limited.json()["code"]) == (429, "webhook.rate_limited")
    assert int(limited.headers["Retry-After"]) >= 1

    # A second webhook without HMAC or a rate limit, for the remaining refusals.
    await apply_hook(h, "plain", "", {"token": TOKEN[::-1]})
    plain = f"/hooks/{TOKEN[::-1]}"
    too_big = await post(plain, b"{" + b" " * (1024 * 1024 + 1) + b"}")
    assert (too_big.status_code, too_big.json()["code"]) == (413, "webhook.body.too_large")
    not_json = await post(plain, b"{nope")
    assert (not_json.status_code, not_json.json()["code"]) == (400, "webhook.body.invalid")
    unmapped = await post(plain, json.dumps({"order": {"id": "x"}}).encode())
    assert (unmapped.status_code, unmapped.json()["code"]) == (422, "webhook.params.invalid")
    absent = await post(plain, b"{}")
    assert absent.status_code == 422 and "order" in absent.json()["detail"]
    busy = await post(plain, good)  # concurrency Skip: the accepted run is in flight
    assert (busy.status_code, busy.json()["code"]) == (409, "run.concurrency.skipped")

    # Disabled answers exactly as unknown does.
    await apply_hook(h, "plain", "  enabled: false", {})
    disabled = await post(plain, good)
    assert disabled.status_code == unknown.status_code
    assert disabled.json() == unknown.json()

    recorded = await deliveries(h)
    assert [r[0] for r in recorded] == [404, 401, 401, 401, 202, 429, 413, 400, 422, 422, 409, 404]
    assert all(r[1] == ("accepted" if r[0] == 202 else "refused") for r in recorded)
    assert await h.fetchval("SELECT count(*) FROM runs") == 1
    metrics = h.engine.triggers._intake.metrics  # type: ignore[union-attr]
    assert metrics.refusals.labels("webhook.signature.invalid")._value.get() == 2
    assert metrics.deliveries.labels("refused")._value.get() == 11


async def test_apply_refusals(h: Harness, tmp_path: Path) -> None:
    await h.apply(PIPELINE.format(path=tmp_path / "rec", concurrency="Allow"))
    with pytest.raises(ProblemsError) as no_token:
        await apply_hook(h, "orders", "", {})
    assert [p.code for p in no_token.value.problems] == ["webhook.token.missing"]
    with pytest.raises(ProblemsError) as short:
        await apply_hook(h, "orders", "", {"token": "short"})
    assert [p.code for p in short.value.problems] == ["webhook.token.too_short"]
    # An existing webhook keeps its token through an apply that brings none.
    assert await apply_hook(h, "orders", "", {"token": TOKEN}) == "created"
    assert await apply_hook(h, "orders", "  enabled: true", {}) in ("unchanged", "updated")
    stored = await h.fetchval("SELECT token_hash FROM webhooks")
    assert stored == hashlib.sha256(TOKEN.encode()).hexdigest()
    assert (await h.engine.manifests.delete("Webhook", "default", "orders")).found
    assert await h.fetchval("SELECT count(*) FROM webhooks") == 0


def _fuzz_cases(rng: random.Random, good: bytes) -> list[tuple[str, bytes, dict[str, str]]]:
    bodies = [
        b"",
        b"null",
        b"[]",
        b"[1,2,3]",
        b'"text"',
        b"\xff\xfe\x00garbage",
        b'{"order": {"id": 1}',
        b'{"order": []}',
        b'{"order": {"id": 1e400}}',
        b'{"order": {"id": ' + b"9" * 5000 + b"}}",
        b"[" * 5000,
        b'{"order": {"id": true}}',
        good,
        bytes(rng.getrandbits(8) for _ in range(200)),
        json.dumps({"order": {"id": 1}, "where": "x" * 10000}).encode(),
    ]
    sigs = [
        None,
        "",
        "sha256=",
        "sha256=zz",
        "0" * 64,
        "sha256=" + "f" * 64,
        "é" * 10,
        "sha256=" + sign(good),
    ]
    cases = []
    for _ in range(120):
        body = rng.choice(bodies)
        headers: dict[str, str] = {}
        sig = rng.choice(sigs)
        if sig is not None:
            headers["X-Dirigent-Signature"] = sig
        if rng.random() < 0.3:
            headers["Content-Type"] = rng.choice(["text/plain", "application/json", "\x7f"])
        if rng.random() < 0.1:
            headers["Content-Encoding"] = rng.choice(["gzip", "br", "identity"])
        token = rng.choice([TOKEN, TOKEN + "x", "", "%00", "../../etc", "a" * 300])
        cases.append((token, body, headers))
    return cases


async def test_fuzz_never_500_and_every_delivery_is_recorded(
    h: Harness, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    await setup(h, tmp_path, extra="  hmacSecretRef: {name: orders-hmac, key: hmac}")
    rng = random.Random(1405)
    good = json.dumps({"order": {"id": 7}}).encode()
    answered = 0
    routed = 0
    strangers = 0
    for token, body, headers in _fuzz_cases(rng, good):
        raw = [(k.encode(), v.encode()) for k, v in headers.items()]
        try:
            answer = await client.post(f"/hooks/{token}", content=body, headers=raw)
        except httpx.HTTPError:
            continue  # a request the client itself refuses to send (e.g. a bad Content-Length)
        answered += 1
        assert answer.status_code < 500, (token, body[:80], headers, answer.text)
        # Requests that reached the route carry our answer; others are the router's own 404
        # (an empty token, a path the client normalised away).
        ours = answer.json()
        routed += "code" in ours or "runId" in ours
        strangers += ours.get("code") == "webhook.not_found"
    # Every delivery to the webhook is a row; unknown tokens are counted, one row sampled.
    recorded = await h.fetchval(
        "SELECT count(*) FROM webhook_deliveries WHERE webhook_id IS NOT NULL"
    )
    sampled = await h.fetchval("SELECT count(*) FROM webhook_deliveries WHERE webhook_id IS NULL")
    assert answered > 60 and strangers > 10
    assert recorded == routed - strangers, (recorded, routed, strangers)
    assert sampled == 1
    metrics = h.engine.triggers._intake.metrics  # type: ignore[union-attr]
    assert metrics.refusals.labels("webhook.not_found")._value.get() == strangers
    accepted = await h.fetchval("SELECT count(*) FROM webhook_deliveries WHERE result = 'accepted'")
    assert accepted == await h.fetchval("SELECT count(*) FROM runs")


async def test_strangers_are_counted_and_sampled_not_stored_each(
    h: Harness, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    await setup(h, tmp_path)
    for n in range(30):
        answer = await client.post(f"/hooks/unknown-token-{n:04d}", content=b"{}")
        assert answer.status_code == 404
    assert await h.fetchval("SELECT count(*) FROM webhook_deliveries") == 1
    metrics = h.engine.triggers._intake.metrics  # type: ignore[union-attr]
    assert metrics.refusals.labels("webhook.not_found")._value.get() == 30


async def test_retention_prunes_old_deliveries(
    h: Harness, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    import datetime as dt

    await setup(h, tmp_path)
    for _ in range(3):
        signed = {"X-Dirigent-Signature": sign(b"{}")}
        assert (await client.post(f"/hooks/{TOKEN}", content=b"{}", headers=signed)).status_code
    assert await h.fetchval("SELECT count(*) FROM webhook_deliveries") == 3
    await h.execute(
        "UPDATE webhook_deliveries SET received_at = now() - interval '10 days' "
        "WHERE id = (SELECT min(id) FROM webhook_deliveries)"
    )
    kept = await h.worker().sweep()
    assert kept["deliveries_pruned"] == 0  # nothing is deleted unless retention is set
    swept = await h.worker(retention_logs=dt.timedelta(days=7)).sweep()
    assert swept["deliveries_pruned"] == 1
    assert await h.fetchval("SELECT count(*) FROM webhook_deliveries") == 2


async def test_a_signature_tolerance_refuses_replays(
    h: Harness, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    import time

    extra = "  hmacSecretRef: {name: orders-hmac, key: hmac}\n  signatureTolerance: 1m"
    await setup(h, tmp_path, extra=extra)
    body = json.dumps({"order": {"id": 5}}).encode()

    async def post(stamp: str | None, signed: bytes) -> httpx.Response:
        headers = {"X-Dirigent-Signature": sign(signed)}
        if stamp is not None:
            headers["X-Dirigent-Timestamp"] = stamp
        return await client.post(f"/hooks/{TOKEN}", content=body, headers=headers)

    now = str(int(time.time()))
    stale = str(int(time.time()) - 600)
    missing = await post(None, body)
    assert (missing.status_code, missing.json()["code"]) == (401, "webhook.timestamp.missing")
    replayed = await post(stale, stale.encode() + b"." + body)
    assert (replayed.status_code, replayed.json()["code"]) == (401, "webhook.timestamp.stale")
    body_only = await post(now, body)  # the timestamp must be under the signature
    assert (body_only.status_code, body_only.json()["code"]) == (401, "webhook.signature.invalid")
    fresh = await post(now, now.encode() + b"." + body)
    assert fresh.status_code == 202, fresh.text


async def test_a_tolerance_without_a_secret_is_refused_at_apply(h: Harness) -> None:
    from dirigent.engine.shapes.manifests.loading import parse_manifest, read_text

    docs, _ = read_text(WEBHOOK.format(name="loose", extra="  signatureTolerance: 5m"))
    manifest, problems = parse_manifest(docs[0].data)
    assert manifest is None
    assert [p.code for p in problems] == ["webhook.tolerance.without_hmac"], problems
