"""Engine settings, read from `DIRIGENT_*` environment variables.

One `EngineSettings` object is built by each process entry point (`dirigent worker`, `api`,
`operator`, `dev`, `migrate`) and passed down explicitly; there is deliberately no global
instance, so tests build their own and two engines in one process never share state.

Values written by people accept the same spellings as pipeline documents: durations as
`30s`, `1h`, `500ms` or bare seconds; sizes as `64kb` or bare bytes; lists as
comma-separated text (`a,b`) or a JSON array. The artifact root is a folder (`/data`, or
`file:///data`) or a URI of an installed storage scheme (`s3://bucket/prefix`).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import re
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Self
from urllib.parse import urlsplit

from pydantic import BeforeValidator, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from dirigent.sdk.names import ENTITY_NAME_PATTERN, NAMESPACE_PATTERN
from dirigent.sdk.storage import SCHEME_PATTERN
from dirigent.sdk.units import Duration, Size

__all__ = ["SECRET_KEY_BYTES", "EngineSettings", "decode_secret_key"]

SECRET_KEY_BYTES: Final = 32
_HEX_KEY: Final = re.compile(r"^[0-9a-fA-F]{64}$")
_SCHEME: Final = re.compile(SCHEME_PATTERN)
_CONNECTION_REF: Final = re.compile(
    NAMESPACE_PATTERN.removesuffix("$") + "/" + ENTITY_NAME_PATTERN.removeprefix("^")
)


def decode_secret_key(text: str) -> bytes:
    """Decode a 32-byte key written as 64 hex digits or as base64 (standard or URL-safe).

    The two forms cannot be confused: 64 hex digits would be 48 bytes as base64, and a
    32-byte key is 43-44 base64 characters. Error messages never echo the key.
    """
    raw = text.strip()
    if _HEX_KEY.match(raw):
        return bytes.fromhex(raw)
    padded = raw + "=" * (-len(raw) % 4)
    try:
        key = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(
            "DIRIGENT_SECRET_KEY must be 32 bytes written as 64 hex digits or as base64 "
            "(e.g. the output of `openssl rand -base64 32`); this value is neither"
        ) from None
    if len(key) != SECRET_KEY_BYTES:
        raise ValueError(
            f"DIRIGENT_SECRET_KEY must decode to {SECRET_KEY_BYTES} bytes, this one decodes "
            f"to {len(key)} (generate one with `openssl rand -base64 32`)"
        )
    return key


def _artifact_root(value: Any) -> Any:
    """A folder or a URI, as text: ``/data``, ``file:///data``, ``s3://bucket/prefix``."""
    if isinstance(value, Path):
        return str(value)
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text:
        raise ValueError("must be a folder or a URI such as s3://bucket/prefix, not empty")
    scheme, sep, rest = text.partition("://")
    if sep and not _SCHEME.fullmatch(scheme):
        raise ValueError(f"{scheme!r} is not a URI scheme (write s3://bucket/prefix or a folder)")
    if sep and scheme != "file" and not rest.strip("/"):
        raise ValueError(f"{text} names no bucket or location after {scheme}://")
    return text


def _csv_list(value: Any) -> Any:
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            return json.loads(text)
        return [part.strip() for part in text.split(",") if part.strip()]
    return value


def _duration(value: Any) -> Any:
    return None if value is None or value == "" else Duration.parse(value).to_timedelta()


def _seconds(value: Any) -> Any:
    return Duration.parse(value).total_seconds()


def _size(value: Any) -> Any:
    return Size.parse(value).bytes


CsvList = Annotated[list[str], NoDecode, BeforeValidator(_csv_list)]
Span = Annotated[dt.timedelta, BeforeValidator(_duration)]
OptionalSpan = Annotated[dt.timedelta | None, BeforeValidator(_duration)]
Seconds = Annotated[float, BeforeValidator(_seconds)]
Bytes = Annotated[int, BeforeValidator(_size)]


class EngineSettings(BaseSettings):
    """Everything the engine needs from its environment. Build one per process."""

    # hide_input_in_errors: a malformed secret key must not end up in a log via its error.
    model_config = SettingsConfigDict(
        env_prefix="DIRIGENT_", extra="ignore", frozen=True, hide_input_in_errors=True
    )

    database_url: str | None = Field(
        default=None,
        description="postgresql+asyncpg:// URL; optional when an embedded server is used.",
    )
    database_direct_url: str | None = Field(
        default=None,
        description="Direct PostgreSQL URL for session-bound connections (LISTEN, the "
        "scheduler's leader lock, the schema check). Set it when databaseUrl points at "
        "PgBouncer in transaction mode; the pool then caches no prepared statements.",
    )
    secret_key: SecretStr | None = Field(
        default=None,
        description="32-byte AES-GCM key for connection secrets: 64 hex digits or base64.",
    )
    artifact_root: Annotated[str, BeforeValidator(_artifact_root)] = Field(
        default=".dirigent/artifacts",
        description="Where step artifacts larger than inlineArtifactMax and storage scratch "
        "go: a folder (file://; the image sets /var/lib/dirigent/artifacts) or a URI of an "
        "installed storage scheme such as s3://bucket/prefix. Each namespace gets its own "
        "part, <root>/namespaces/<namespace>.",
    )
    artifact_connection: str | None = Field(
        default=None,
        description="The Connection (namespace/name) whose settings open the artifact root's "
        "store, e.g. dirigent-system/artifacts; unset: the processes' ambient identity.",
    )
    enabled_unsafe_blocks: CsvList = Field(default_factory=list)
    inline_artifact_max: Bytes = Field(default=65536, ge=0)
    worker_concurrency: int = Field(default=8, ge=1)
    database_pool_size: int = Field(
        default=10,
        ge=2,
        description="Most pooled PostgreSQL connections one process opens, whatever its "
        "worker concurrency (a worker adds one LISTEN connection; see docs/performance.md).",
    )
    worker_tags: CsvList = Field(default_factory=list)
    poll_interval: Seconds = Field(default=1.0, gt=0)
    lease_duration: Span = dt.timedelta(seconds=30)
    heartbeat_interval: Span = dt.timedelta(seconds=10)
    stuck_run: Span = dt.timedelta(hours=1)
    sweep_interval: Seconds = Field(default=5.0, gt=0)
    max_recoveries: int = Field(
        default=5,
        ge=1,
        description="Expired leases recovered for one attempt before it fails instead.",
    )
    metrics_port: int | None = Field(
        default=9464,
        ge=0,
        le=65535,
        description="Port of the process's /metrics (Prometheus); 0 picks a free one.",
    )
    retention_runs: OptionalSpan = None
    retention_logs: OptionalSpan = None
    log_format: Literal["console", "json"] = "console"
    # Triggers and alerting (seed §8-9).
    scheduler_misfire_grace: Span = dt.timedelta(minutes=5)
    scheduler_tick: Seconds = Field(default=1.0, gt=0)
    scheduler_catch_up: int = Field(default=10, ge=1)
    webhook_max_body: Bytes = Field(default=1024 * 1024, ge=1)
    # Every other request body (apply, run, backfill, ...): refused with 413 past this.
    api_max_body: Bytes = Field(default=4 * 1024 * 1024, ge=1)
    # Tokens the REST API accepts must be minted for one of these (TokenReview audiences):
    # `kubectl create token NAME --audience dirigent`. Empty accepts any audience.
    api_token_audiences: CsvList = Field(default_factory=lambda: ["dirigent"])
    notification_max_attempts: int = Field(default=5, ge=1)
    notification_backoff: Span = dt.timedelta(seconds=10)
    report_max_size: Bytes = Field(default=256 * 1024, ge=1)

    @field_validator("secret_key")
    @classmethod
    def _check_secret_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            decode_secret_key(value.get_secret_value())
        return value

    @field_validator("artifact_connection")
    @classmethod
    def _check_artifact_connection(cls, value: str | None) -> str | None:
        if value is not None and not _CONNECTION_REF.fullmatch(value):
            raise ValueError(
                "must name a Connection as <namespace>/<name> (both DNS labels), "
                "e.g. dirigent-system/artifacts"
            )
        return value

    @field_validator("heartbeat_interval", "lease_duration", "stuck_run")
    @classmethod
    def _positive(cls, value: dt.timedelta) -> dt.timedelta:
        if value <= dt.timedelta(0):
            raise ValueError("must be positive")
        return value

    @model_validator(mode="after")
    def _heartbeat_within_lease(self) -> Self:
        # A lease that expires before the next heartbeat would be reclaimed from a live worker.
        if self.heartbeat_interval >= self.lease_duration:
            raise ValueError(
                f"heartbeat_interval ({self.heartbeat_interval}) must be shorter than "
                f"lease_duration ({self.lease_duration})"
            )
        return self

    def secret_key_bytes(self) -> bytes:
        """The decoded 32-byte key; a clear error when none is configured."""
        if self.secret_key is None:
            raise ValueError(
                "DIRIGENT_SECRET_KEY is not set; it is needed to seal connection secrets "
                "(generate one with `openssl rand -base64 32`)"
            )
        return decode_secret_key(self.secret_key.get_secret_value())

    def require_database_url(self) -> str:
        if not self.database_url:
            raise ValueError("DIRIGENT_DATABASE_URL is not set")
        return self.database_url


# What a connection pooler's URL usually looks like: PgBouncer's default port, or a host
# named for the pooler (pgbouncer, pooler, a cloud proxy).
_POOLER_PORTS = frozenset({6432})
_POOLER_HOSTS = ("pgbouncer", "pooler", "proxy")


def pooler_warning(settings: EngineSettings) -> str | None:
    """A sentence to log at start when the database URL looks like a pooler in transaction
    mode and no direct URL is set (LISTEN and the leader lock then silently misbehave)."""
    if not settings.database_url or settings.database_direct_url:
        return None
    parsed = urlsplit(settings.database_url)
    host = (parsed.hostname or "").lower()
    try:
        port = parsed.port
    except ValueError:
        return None
    if port not in _POOLER_PORTS and not any(word in host for word in _POOLER_HOSTS):
        return None
    return (
        f"DIRIGENT_DATABASE_URL ({host}:{port or 5432}) looks like a connection pooler and "
        "DIRIGENT_DATABASE_DIRECT_URL is not set: in transaction mode LISTEN, advisory locks "
        "and prepared statements break; set the direct URL to the server itself "
        "(docs/operate.md)"
    )
