"""``webhook.post``: an outbound JSON POST through a webhook connection, optionally signed.

When the connection holds a secret, the body is signed with HMAC-SHA256 and the signature
sent as ``sha256=<hex>`` in the connection's signature header, so the receiver can check
the body came from us unmodified. The body is serialised once and the signature computed
over exactly those bytes. A POST is not idempotent, so the transport never resends it;
the step's retry policy decides (5xx, 429 and timeouts transient, other 4xx rejected).
The connection's secret values are redacted from every error, a receiver's echoed body
included.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import ClassVar

import httpx
from pydantic import BaseModel, Field, JsonValue

from dirigent.blocks.base import Config, Output
from dirigent.blocks.connections import WebhookConnection
from dirigent.sdk import (
    BlockFailure,
    ErrorClass,
    Message,
    Operator,
    OperatorSpec,
    StepContext,
    http_status_class,
    redact,
    secret_values,
)

__all__ = ["WebhookPostOperator", "post_json", "signature"]

STATUS = Message("webhook.status", "POST {url} answered {status}: {body}")
TRANSPORT = Message("webhook.transport", "POST {url} failed before an answer: {error}")


def signature(secret: str, body: bytes) -> str:
    """``sha256=<hex>`` over ``body`` with ``secret``: what a receiver recomputes."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


async def post_json(conn: WebhookConnection, payload: JsonValue, headers: dict[str, str]) -> int:
    """POST ``payload`` signed as the connection says; raises BlockFailure unless 2xx/3xx."""
    body = json.dumps(payload, separators=(",", ":")).encode()
    sent = {"Content-Type": "application/json", **conn.headers, **headers}
    if conn.secret is not None:
        sent[conn.signature_header] = signature(conn.secret.get_secret_value(), body)
    try:
        async with httpx.AsyncClient(
            verify=conn.verify_tls, timeout=conn.timeout.total_seconds()
        ) as client:
            response = await client.post(conn.url, content=body, headers=sent)
    except httpx.HTTPError as err:
        raise BlockFailure(
            TRANSPORT,
            error_class=ErrorClass.TRANSIENT,
            url=redact(conn.url, secret_values(conn)),
            error=redact(repr(err), secret_values(conn)),
        ) from err
    if response.status_code >= 400:
        raise BlockFailure(
            STATUS,
            error_class=http_status_class(response.status_code),
            url=redact(conn.url, secret_values(conn)),
            status=response.status_code,
            body=redact(response.text, secret_values(conn))[:500],
        )
    return response.status_code


class PostConfig(Config):
    connection: str = Field(description="Connection of kind webhook.")
    payload: JsonValue = Field(default=None, description="The JSON body; references resolved.")
    headers: dict[str, str] = Field(default_factory=dict)


class PostOutput(Output):
    status: int
    elapsed_ms: int


class WebhookPostOperator(Operator[PostConfig, PostOutput]):
    """POSTs a JSON payload to a webhook connection, HMAC-signed when it holds a secret."""

    spec: ClassVar[OperatorSpec] = OperatorSpec(
        id="webhook.post", summary="POST a JSON payload to a webhook (optionally HMAC-signed)."
    )
    config_model: ClassVar[type[BaseModel]] = PostConfig
    output_model: ClassVar[type[BaseModel]] = PostOutput

    async def execute(self, config: PostConfig, ctx: StepContext) -> PostOutput:
        conn = ctx.connection(config.connection, WebhookConnection)
        started = time.monotonic()
        status = await post_json(conn, config.payload, config.headers)
        return PostOutput(status=status, elapsed_ms=int((time.monotonic() - started) * 1000))
