"""Webhooks: stored by the SHA-256 of their token, deliveries recorded whatever the answer.

The plaintext token never reaches a row: apply stores its hash and an eight-character prefix
(enough to recognise it in a listing, useless to call with). An existing webhook keeps its
token through an apply that brings none, because rotating a credential as a side effect of
an unrelated edit would break whoever already calls it. The HMAC secret is sealed like a
connection secret.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import asyncpg

from dirigent.engine.infrastructure.crypto import SecretSealer
from dirigent.engine.rules.validation.triggers import check_webhook_against
from dirigent.engine.shapes.manifests.webhook import Webhook, WebhookSpec
from dirigent.engine.shapes.problems import Problem, ProblemsError, problem
from dirigent.engine.store.pool import affected
from dirigent.engine.store.transactions.definitions import ApplyAction
from dirigent.engine.store.transactions.runs import RunRequest
from dirigent.engine.store.transactions.schedules import CreateRun, check_target, spec_digest
from dirigent.engine.store.transactions.versions import VersionCache

TOKEN_KEY = "token"
HMAC_KEY = "hmacSecret"
MIN_TOKEN_LENGTH = 16


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _hmac_value(spec: WebhookSpec, values: Mapping[str, str]) -> str | None:
    if spec.hmac_secret_ref is None:
        return None
    return values.get(HMAC_KEY, values.get(spec.hmac_secret_ref.key))


def _secret_problems(
    spec: WebhookSpec, values: Mapping[str, str], exists: bool, sealer: SecretSealer | None
) -> list[Problem]:
    token = values.get(TOKEN_KEY)
    out: list[Problem] = []
    if token is None and not exists:
        out.append(
            problem(
                "webhook.token.missing",
                "a new webhook needs its token: pass it as secret value 'token' "
                "(the operator mints one into the webhook's Secret)",
                "spec",
            )
        )
    elif token is not None and len(token) < MIN_TOKEN_LENGTH:
        out.append(
            problem(
                "webhook.token.too_short",
                f"a webhook token needs at least {MIN_TOKEN_LENGTH} characters of entropy",
                "spec",
            )
        )
    if spec.hmac_secret_ref is not None:
        if _hmac_value(spec, values) is None and not exists:
            out.append(
                problem(
                    "webhook.hmac.missing",
                    f"no value was given for the HMAC secret (secret value '{HMAC_KEY}')",
                    "spec",
                    "hmacSecretRef",
                )
            )
        if sealer is None:
            out.append(
                problem(
                    "webhook.hmac.no_key",
                    "an HMAC secret is stored sealed: set DIRIGENT_SECRET_KEY",
                    "spec",
                    "hmacSecretRef",
                )
            )
    return out


async def apply_webhook(
    conn: asyncpg.Connection,
    webhook: Webhook,
    *,
    namespace: str,
    versions: VersionCache,
    secret_values: Mapping[str, str],
    sealer: SecretSealer | None,
    owner_uid: str | None = None,
) -> ApplyAction:
    spec, name = webhook.spec, webhook.metadata.name
    row = await conn.fetchrow(
        "SELECT id, digest, token_hash, hmac_secret FROM webhooks "
        "WHERE namespace = $1 AND name = $2 FOR UPDATE",
        namespace,
        name,
    )
    target, problems = await check_target(conn, namespace, spec.pipeline, versions)
    if target is not None:
        problems += check_webhook_against(webhook, target)
    problems += _secret_problems(spec, secret_values, row is not None, sealer)
    if problems:
        raise ProblemsError(problems)
    token = secret_values.get(TOKEN_KEY)
    hashed = token_hash(token) if token is not None else row["token_hash"]
    prefix = token[:8] if token is not None else None
    hmac_plain = _hmac_value(spec, secret_values)
    sealed: str | None = None
    if spec.hmac_secret_ref is not None:
        sealed = row["hmac_secret"] if row is not None else None
        if hmac_plain is not None and sealer is not None:
            sealed = sealer.seal(
                hmac_plain, namespace=namespace, connection=f"webhook/{name}", field="hmac"
            )
    doc = spec.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    hmac_seen = token_hash(hmac_plain) if hmac_plain is not None else None
    digest = spec_digest({"spec": doc, "token": hashed, "hmac": hmac_seen})
    if row is not None and row["digest"] == digest:
        return ApplyAction.UNCHANGED
    await conn.execute(
        """
        INSERT INTO webhooks (namespace, name, pipeline, spec, digest, token_hash, token_prefix,
                              hmac_secret, enabled, owner_uid)
        VALUES ($1, $2, $3, $4, $5, $6, COALESCE($7, ''), $8, $9, $10)
        ON CONFLICT (namespace, name) DO UPDATE SET
            pipeline = EXCLUDED.pipeline, spec = EXCLUDED.spec, digest = EXCLUDED.digest,
            token_hash = EXCLUDED.token_hash,
            token_prefix = COALESCE($7, webhooks.token_prefix),
            hmac_secret = EXCLUDED.hmac_secret, enabled = EXCLUDED.enabled,
            owner_uid = COALESCE(EXCLUDED.owner_uid, webhooks.owner_uid), updated_at = now()
        """,
        namespace,
        name,
        spec.pipeline,
        doc,
        digest,
        hashed,
        prefix,
        sealed,
        spec.enabled,
        owner_uid,
    )
    return ApplyAction.CREATED if row is None else ApplyAction.UPDATED


async def delete_webhook(conn: asyncpg.Connection, namespace: str, name: str) -> bool:
    status: str = await conn.execute(
        "DELETE FROM webhooks WHERE namespace = $1 AND name = $2", namespace, name
    )
    return affected(status) == 1


@dataclass(frozen=True)
class Hook:
    """What intake needs of a webhook before it reads a body."""

    id: int
    namespace: str
    name: str
    pipeline: str
    token_hash: str
    spec: WebhookSpec
    hmac_secret: str | None  # sealed
    enabled: bool


async def find_hook(conn: asyncpg.Connection, hashed: str) -> Hook | None:
    row = await conn.fetchrow(
        """SELECT id, namespace, name, pipeline, token_hash, spec, hmac_secret, enabled
           FROM webhooks WHERE token_hash = $1""",
        hashed,
    )
    if row is None:
        return None
    return Hook(
        row["id"],
        row["namespace"],
        row["name"],
        row["pipeline"],
        row["token_hash"],
        WebhookSpec.model_validate(row["spec"]),
        row["hmac_secret"],
        row["enabled"],
    )


@dataclass(frozen=True)
class Delivery:
    webhook_id: int | None
    status_code: int
    reason: str | None = None  # the problem code of a refusal
    message: str | None = None
    body_size: int | None = None
    run_id: int | None = None


async def record(conn: asyncpg.Connection, d: Delivery) -> None:
    """Write one delivery and the webhook's last-delivery status."""
    result = "accepted" if d.run_id is not None else "refused"
    await conn.execute(
        """
        WITH w AS (
            UPDATE webhooks SET last_delivery_at = now(), last_delivery_result = $2
            WHERE id = $1
        )
        INSERT INTO webhook_deliveries (webhook_id, result, reason, status_code, run_id, message,
                                        body_size)
        VALUES ($1, $2, $3, $4, $5, $6, $7)
        """,
        d.webhook_id,
        result,
        d.reason,
        d.status_code,
        d.run_id,
        d.message,
        d.body_size,
    )


async def start_run(
    conn: asyncpg.Connection, hook: Hook, params: dict[str, Any], body_size: int, create: CreateRun
) -> Delivery:
    """Create the run in a savepoint and record the delivery, whichever way it went."""
    request = RunRequest(
        hook.namespace,
        hook.pipeline,
        params,
        triggered_by_kind="webhook",
        triggered_by_ref=hook.name,
    )
    try:
        async with conn.transaction():
            created = await create(conn, request)
        delivery = Delivery(hook.id, 202, body_size=body_size, run_id=created.run_id)
    except ProblemsError as err:
        first = err.problems[0]
        status = 409 if first.code == "run.concurrency.skipped" else 422
        reason = first.code if status == 409 else "webhook.params.invalid"
        delivery = Delivery(
            hook.id, status, reason, "; ".join(p.render() for p in err.problems), body_size
        )
    await record(conn, delivery)
    return delivery
