"""Webhook intake: ``POST /hooks/{token}``, the product's one unauthenticated write.

The order is the security model (seed §8): the token is looked up by its SHA-256 and compared
in constant time; an unknown token and a disabled webhook answer identically (the endpoint is
no oracle); the per-token rate limit is checked before a byte of the body is read; the body
is capped (by its declared length, then while streaming); an HMAC-SHA256 over the raw bytes
is checked when the webhook holds a secret; the payload is mapped onto parameters, which the
run's creation validates against the pipeline's schema. Every delivery to a known webhook is
recorded, refusals included; an accepted one is recorded in the transaction that creates its
run. Deliveries to unknown tokens are counted (``refusals{reason="webhook.not_found"}``) and
only sampled as rows, one per ``StrangerSample.every`` seconds per process, so a stranger
cannot grow the table by posting. Nothing else executes in the request path.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from dirigent.engine.infrastructure.crypto import SecretSealer
from dirigent.engine.infrastructure.trigger_metrics import RunMetrics, WebhookMetrics
from dirigent.engine.shapes.manifests.webhook import (
    is_missing,
    parse_payload_path,
    read_payload_path,
)
from dirigent.engine.store.pool import Database
from dirigent.engine.store.transactions import webhooks
from dirigent.engine.store.transactions.schedules import CreateRun
from dirigent.engine.store.transactions.webhooks import Delivery, Hook

SIGNATURE_HEADER = "x-dirigent-signature"
TIMESTAMP_HEADER = "x-dirigent-timestamp"
NOT_FOUND = "no webhook answers at this address"


@dataclass(frozen=True)
class HookAnswer:
    """What the HTTP layer sends back: 202 with the run id, or a Problem."""

    status_code: int
    run_id: int | None = None
    code: str | None = None
    message: str | None = None
    retry_after: int | None = None

    def body(self) -> dict[str, Any]:
        if self.run_id is not None:
            return {"runId": self.run_id}
        return {"code": self.code, "message": self.message, "status": self.status_code}

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)} if self.retry_after is not None else {}


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class RateLimiter:
    """A token bucket per webhook, in this process (a limit is per API process)."""

    clock: Any = time.monotonic
    _buckets: dict[int, _Bucket] = field(default_factory=dict)

    def take(self, key: int, per_minute: int, burst: int) -> float | None:
        """None when allowed, else the seconds until a token is free."""
        now = self.clock()
        rate = per_minute / 60.0
        bucket = self._buckets.setdefault(key, _Bucket(float(burst), now))
        bucket.tokens = min(float(burst), bucket.tokens + (now - bucket.at) * rate)
        bucket.at = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return None
        return (1.0 - bucket.tokens) / rate


@dataclass
class StrangerSample:
    """Keeps one unknown-token delivery as a row every ``every`` seconds (for a person
    debugging a misconfigured sender); the rest are only counted."""

    every: float = 10.0
    clock: Any = time.monotonic
    _last: float | None = None

    def take(self) -> bool:
        now = self.clock()
        if self._last is not None and now - self._last < self.every:
            return False
        self._last = now
        return True


class _Refused(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        retry_after: int | None = None,
        webhook_id: int | None = None,
    ) -> None:
        super().__init__(message)
        self.answer = HookAnswer(status, None, code, message, retry_after)
        self.webhook_id = webhook_id


class WebhookIntake:
    """One per process (it holds the rate-limit buckets)."""

    def __init__(
        self,
        db: Database,
        sealer: SecretSealer | None,
        create: CreateRun,
        *,
        max_body: int,
        metrics: WebhookMetrics | None = None,
        runs: RunMetrics | None = None,
    ) -> None:
        self.db = db
        self.sealer = sealer
        self.create = create
        self.max_body = max_body
        self.metrics = metrics or WebhookMetrics()
        self.runs = runs or RunMetrics()
        self.limiter = RateLimiter()
        self.strangers = StrangerSample()
        self.clock: Any = time.time  # wall clock: the sender's timestamps are Unix time

    async def receive(
        self, token: str, headers: Mapping[str, str], body: AsyncIterator[bytes]
    ) -> HookAnswer:
        lowered = {k.lower(): v for k, v in headers.items()}
        hook: Hook | None = None
        size: int | None = None
        try:
            hook = await self._find(token)
            self._limit(hook)
            raw = await self._read(lowered, body)
            size = len(raw)
            self._verify(hook, lowered, raw)
            params = self._params(hook, raw)
        except _Refused as refused:
            owner = refused.webhook_id if hook is None else hook.id
            await self._refuse(owner, refused.answer, size)
            return refused.answer
        delivery = await self.db.transaction(
            lambda c: webhooks.start_run(c, hook, params, size or 0, self.create)
        )
        if delivery.run_id is None:
            self._count(delivery.reason or "webhook.refused")
            return HookAnswer(delivery.status_code, None, delivery.reason, delivery.message)
        self.metrics.deliveries.labels("accepted").inc()
        self.runs.started(hook.namespace, hook.pipeline, "webhook")
        return HookAnswer(202, delivery.run_id)

    async def _find(self, token: str) -> Hook:
        hashed = webhooks.token_hash(token)
        hook = await self.db.read(lambda c: webhooks.find_hook(c, hashed))
        if hook is None or not hmac.compare_digest(hook.token_hash, hashed):
            raise _Refused(404, "webhook.not_found", NOT_FOUND)
        if not hook.enabled:
            # Recorded against the webhook, answered exactly as an unknown token is.
            raise _Refused(404, "webhook.not_found", NOT_FOUND, webhook_id=hook.id)
        return hook

    def _limit(self, hook: Hook) -> None:
        limit = hook.spec.rate_limit
        if limit is None:
            return
        wait = self.limiter.take(hook.id, limit.per_minute, limit.burst or limit.per_minute)
        if wait is not None:
            raise _Refused(
                429,
                "webhook.rate_limited",
                f"more than {limit.per_minute} deliveries a minute; retry later",
                retry_after=max(1, int(wait + 0.999)),
            )

    async def _read(self, headers: Mapping[str, str], body: AsyncIterator[bytes]) -> bytes:
        declared = headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body):
            raise self._too_large()
        chunks: list[bytes] = []
        total = 0
        async for chunk in body:
            total += len(chunk)
            if total > self.max_body:
                raise self._too_large()
            chunks.append(chunk)
        return b"".join(chunks)

    def _too_large(self) -> _Refused:
        return _Refused(413, "webhook.body.too_large", f"the body exceeds {self.max_body} bytes")

    def _verify(self, hook: Hook, headers: Mapping[str, str], raw: bytes) -> None:
        if hook.hmac_secret is None:
            return
        given = headers.get(SIGNATURE_HEADER)
        if not given:
            raise _Refused(
                401,
                "webhook.signature.missing",
                "this webhook requires X-Dirigent-Signature: an HMAC-SHA256 of the raw body",
            )
        signed = self._signed(hook, headers, raw)
        assert self.sealer is not None, "a sealed HMAC secret needs DIRIGENT_SECRET_KEY"
        secret = self.sealer.open(
            hook.hmac_secret,
            namespace=hook.namespace,
            connection=f"webhook/{hook.name}",
            field="hmac",
        )
        expected = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
        signature = given.strip().removeprefix("sha256=").lower()
        if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace")):
            raise _Refused(
                401,
                "webhook.signature.invalid",
                "X-Dirigent-Signature does not match the body (HMAC-SHA256, hex, 'sha256=' optional)",
            )

    def _signed(self, hook: Hook, headers: Mapping[str, str], raw: bytes) -> bytes:
        """What the signature covers: the raw body, or ``<timestamp>.<body>`` when the webhook
        bounds replays (``signatureTolerance``) and the timestamp is fresh."""
        tolerance = hook.spec.signature_tolerance
        if tolerance is None:
            return raw
        stamp = headers.get(TIMESTAMP_HEADER, "").strip()
        if not stamp.isdigit():
            raise _Refused(
                401,
                "webhook.timestamp.missing",
                "this webhook requires X-Dirigent-Timestamp (Unix seconds) and an HMAC over "
                "'<timestamp>.<body>'",
            )
        skew = abs(self.clock() - int(stamp))
        if skew > tolerance.total_seconds():
            raise _Refused(
                401,
                "webhook.timestamp.stale",
                f"X-Dirigent-Timestamp is {int(skew)}s from the server's clock; this webhook "
                f"accepts {tolerance} (a replayed or delayed delivery)",
            )
        return stamp.encode() + b"." + raw

    def _params(self, hook: Hook, raw: bytes) -> dict[str, Any]:
        try:
            payload = json.loads(raw) if raw.strip() else {}
        except (UnicodeDecodeError, ValueError) as err:
            raise _Refused(400, "webhook.body.invalid", f"the body is not JSON: {err}") from None
        params: dict[str, Any] = {}
        for name, path in hook.spec.params_from_payload.items():
            parsed = parse_payload_path(path)
            value = read_payload_path(payload, parsed) if parsed is not None else None
            if parsed is not None and not is_missing(value):
                params[name] = value
        return params

    async def _refuse(self, owner: int | None, answer: HookAnswer, size: int | None) -> None:
        self._count(answer.code or "webhook.refused")
        if owner is None and not self.strangers.take():
            return
        delivery = Delivery(
            owner,
            answer.status_code,
            answer.code,
            answer.message,
            size,
        )
        await self.db.transaction(lambda c: webhooks.record(c, delivery))

    def _count(self, reason: str) -> None:
        self.metrics.deliveries.labels("refused").inc()
        self.metrics.refusals.labels(reason).inc()
