"""Connection kinds: http, webhook, slack, smtp, kubernetes, postgres.

A connection is where a deployment's specifics live (a base URL, a credential, a host), so
a pipeline names a connection and never carries them. ``SecretStr`` fields are secrets: in
a cluster they come from ``secretKeyRef``s, are sealed at rest, and are opened only on the
worker path. Each kind's ``check`` reaches the system and changes nothing: a GET, an SMTP
NOOP, a ``SELECT 1``, the API server's ``/version``.

No secret leaves through a check: its message is text the operator writes into a
Connection's status and Events, so every kind's check goes through ``CheckedKind.check``,
which turns anything the check raises into a report and redacts the connection's secret
values (and the forms they are sent in) from the message. The models hide their input from
validation errors (``ConnectionConfig``) for the same reason. The kubernetes kind lives with
the Kubernetes code (``dirigent.blocks.kubernetes.connection``) and is re-exported here.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
import smtplib
import ssl
import time
from collections.abc import Iterable
from typing import ClassVar, Literal
from urllib.parse import unquote, urlsplit

import httpx
from pydantic import BaseModel, Field, SecretStr

from dirigent.blocks.base import CheckedKind, ConnectionConfig
from dirigent.blocks.kubernetes.connection import KubernetesConnection, KubernetesConnectionKind
from dirigent.sdk import Duration, HealthReport, secret_values

__all__ = [
    "HttpConnection",
    "HttpConnectionKind",
    "KubernetesConnection",
    "KubernetesConnectionKind",
    "PostgresConnection",
    "PostgresConnectionKind",
    "SlackConnection",
    "SlackConnectionKind",
    "SmtpConnection",
    "SmtpConnectionKind",
    "WebhookConnection",
    "WebhookConnectionKind",
    "smtp_session",
]


class HttpConnection(ConnectionConfig):
    """An HTTP API: base URL, headers, auth (bearer token or basic), TLS, timeout."""

    url: str = Field(description="Base URL; a step's `path` is joined to it.")
    headers: dict[str, str] = Field(default_factory=dict, description="Sent with every request.")
    token: SecretStr | None = Field(default=None, description="Bearer token.")
    username: str | None = Field(default=None, description="Basic auth user.")
    password: SecretStr | None = Field(default=None, description="Basic auth password.")
    verify_tls: bool = Field(default=True, description="Verify the server's certificate.")
    timeout: Duration = Field(default=Duration.of(seconds=30), description="Per request.")

    def auth(self) -> httpx.Auth | None:
        if self.username is not None:
            password = self.password.get_secret_value() if self.password else ""
            return httpx.BasicAuth(self.username, password)
        return None

    def all_headers(self) -> dict[str, str]:
        out = dict(self.headers)
        if self.token is not None:
            out["Authorization"] = f"Bearer {self.token.get_secret_value()}"
        return out

    def sent_secrets(self) -> frozenset[str]:
        """The secret values, and the forms they travel in: a server echoing a request back
        echoes the basic credential base64-encoded, never the password alone."""
        found = set(secret_values(self))
        if self.username is not None and self.password is not None:
            pair = f"{self.username}:{self.password.get_secret_value()}"
            found.add(base64.b64encode(pair.encode()).decode())
        return frozenset(found)


async def _reach(
    method: str, url: str, *, verify: bool, seconds: float, shown: str = "", **kw: object
) -> HealthReport:
    started = time.monotonic()
    try:
        async with httpx.AsyncClient(verify=verify, timeout=seconds) as client:
            response = await client.request(method, url, **kw)  # type: ignore[arg-type]
    except httpx.HTTPError as err:
        return HealthReport(ok=False, message=f"{shown or url} is unreachable: {err!r}")
    latency = int((time.monotonic() - started) * 1000)
    ok = response.status_code < 500 and response.status_code not in (401, 403, 404, 410)
    return HealthReport(
        ok=ok,
        message=f"{method} answered {response.status_code}",
        latency_ms=latency,
        details={"status": response.status_code},
    )


class HttpConnectionKind(CheckedKind[HttpConnection]):
    id: ClassVar[str] = "http"
    summary: ClassVar[str] = "An HTTP API: base URL, headers, bearer or basic auth, TLS."
    config_model: ClassVar[type[BaseModel]] = HttpConnection

    def secrets(self, config: HttpConnection) -> Iterable[str]:
        return config.sent_secrets()

    async def reach(self, config: HttpConnection) -> HealthReport:
        started = time.monotonic()
        try:
            async with httpx.AsyncClient(
                verify=config.verify_tls, timeout=config.timeout.total_seconds()
            ) as client:
                response = await client.get(
                    config.url, headers=config.all_headers(), auth=config.auth()
                )
        except httpx.HTTPError as err:
            return HealthReport(ok=False, message=f"{config.url} is unreachable: {err!r}")
        ok = response.status_code < 500 and response.status_code not in (401, 403)
        return HealthReport(
            ok=ok,
            message=f"GET {config.url} answered {response.status_code}",
            latency_ms=int((time.monotonic() - started) * 1000),
            details={"status": response.status_code},
        )


class WebhookConnection(ConnectionConfig):
    """An outbound webhook receiver: URL, optional HMAC-SHA256 signing secret, headers."""

    url: str
    secret: SecretStr | None = Field(default=None, description="HMAC-SHA256 signing key.")
    signature_header: str = Field(default="X-Dirigent-Signature")
    headers: dict[str, str] = Field(default_factory=dict)
    verify_tls: bool = True
    timeout: Duration = Duration.of(seconds=30)


class WebhookConnectionKind(CheckedKind[WebhookConnection]):
    id: ClassVar[str] = "webhook"
    summary: ClassVar[str] = "A URL that accepts JSON POSTs, optionally HMAC-signed."
    config_model: ClassVar[type[BaseModel]] = WebhookConnection

    async def reach(self, config: WebhookConnection) -> HealthReport:
        # HEAD changes nothing; a receiver that only allows POST answers 405, still reachable.
        report = await _reach(
            "HEAD", config.url, verify=config.verify_tls, seconds=config.timeout.total_seconds()
        )
        if report.details.get("status") == 405:
            return report.model_copy(update={"ok": True})
        return report


class SlackConnection(ConnectionConfig):
    """A Slack incoming webhook (its URL is the credential)."""

    webhook_url: SecretStr
    timeout: Duration = Duration.of(seconds=30)


class SlackConnectionKind(CheckedKind[SlackConnection]):
    id: ClassVar[str] = "slack"
    summary: ClassVar[str] = "A Slack incoming webhook."
    config_model: ClassVar[type[BaseModel]] = SlackConnection

    async def reach(self, config: SlackConnection) -> HealthReport:
        # An empty payload is refused with 400 (no text) without posting anything; a revoked
        # hook answers 403/404/410. The URL is the credential: the message never names it.
        report = await _reach(
            "POST",
            config.webhook_url.get_secret_value(),
            verify=True,
            seconds=config.timeout.total_seconds(),
            shown="the Slack webhook",
            json={},
        )
        return report


class SmtpConnection(ConnectionConfig):
    """An SMTP server for email: host, port, TLS mode, login, sender, default recipients."""

    host: str
    port: int = Field(default=587, ge=1, le=65535)
    security: Literal["none", "starttls", "tls"] = "starttls"
    username: str | None = None
    password: SecretStr | None = None
    from_address: str
    to: list[str] = Field(default_factory=list, description="Default recipients.")
    timeout: Duration = Duration.of(seconds=30)


def smtp_session(config: SmtpConnection) -> smtplib.SMTP:
    """An open, logged-in SMTP session (blocking: call it in a thread)."""
    timeout = config.timeout.total_seconds()
    session: smtplib.SMTP
    if config.security == "tls":
        session = smtplib.SMTP_SSL(
            config.host, config.port, timeout=timeout, context=ssl.create_default_context()
        )
    else:
        session = smtplib.SMTP(config.host, config.port, timeout=timeout)
    try:
        session.ehlo()
        if config.security == "starttls":
            session.starttls(context=ssl.create_default_context())
            session.ehlo()
        if config.username is not None:
            password = config.password.get_secret_value() if config.password else ""
            session.login(config.username, password)
    except BaseException:
        session.close()
        raise
    return session


class SmtpConnectionKind(CheckedKind[SmtpConnection]):
    id: ClassVar[str] = "smtp"
    summary: ClassVar[str] = "An SMTP server that sends email."
    config_model: ClassVar[type[BaseModel]] = SmtpConnection

    async def reach(self, config: SmtpConnection) -> HealthReport:
        def noop() -> int:
            session = smtp_session(config)
            try:
                code, _ = session.noop()
                return int(code)
            finally:
                session.quit()

        started = time.monotonic()
        try:
            code = await asyncio.to_thread(noop)
        except (OSError, smtplib.SMTPException) as err:
            return HealthReport(ok=False, message=f"{config.host}:{config.port}: {err!r}")
        return HealthReport(
            ok=code == 250,
            message=f"NOOP answered {code}",
            latency_ms=int((time.monotonic() - started) * 1000),
        )


class PostgresConnection(ConnectionConfig):
    """A PostgreSQL database, by DSN."""

    dsn: SecretStr = Field(description="postgresql://user:password@host:port/database")
    timeout: Duration = Duration.of(seconds=10)

    def secret_parts(self) -> frozenset[str]:
        """The DSN, and the password inside it (a driver's error may quote either)."""
        dsn = self.dsn.get_secret_value()
        found = {dsn, *re.findall(r"password=([^\s&]+)", dsn)}
        with contextlib.suppress(ValueError):
            password = urlsplit(dsn).password
            if password:
                found |= {password, unquote(password)}
        return frozenset(found)


class PostgresConnectionKind(CheckedKind[PostgresConnection]):
    id: ClassVar[str] = "postgres"
    summary: ClassVar[str] = "A PostgreSQL database."
    config_model: ClassVar[type[BaseModel]] = PostgresConnection

    def secrets(self, config: PostgresConnection) -> Iterable[str]:
        return config.secret_parts()

    async def reach(self, config: PostgresConnection) -> HealthReport:
        import asyncpg

        started = time.monotonic()
        try:
            conn = await asyncpg.connect(
                config.dsn.get_secret_value(), timeout=config.timeout.total_seconds()
            )
            try:
                one = await conn.fetchval("SELECT 1")
            finally:
                await conn.close()
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as err:
            return HealthReport(ok=False, message=f"cannot reach the database: {err}")
        return HealthReport(
            ok=one == 1,
            message="SELECT 1 answered",
            latency_ms=int((time.monotonic() - started) * 1000),
        )
