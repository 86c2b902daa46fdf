"""EngineSettings: environment spellings, defaults, and refusals with useful messages.

A unit test of ``infrastructure.settings`` itself: it imports the module below the door on purpose.
"""

from __future__ import annotations

import base64
import datetime as dt
import os

import pytest
from pydantic import ValidationError

from dirigent.engine.infrastructure.settings import EngineSettings, decode_secret_key

KEY = bytes(range(32))


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("DIRIGENT_"):
            monkeypatch.delenv(name)


def test_defaults() -> None:
    s = EngineSettings()
    assert s.database_url is None
    assert s.inline_artifact_max == 65536
    assert s.worker_concurrency == 8
    assert s.poll_interval == 1.0
    assert s.lease_duration == dt.timedelta(seconds=30)
    assert s.heartbeat_interval == dt.timedelta(seconds=10)
    assert s.stuck_run == dt.timedelta(hours=1)
    assert s.retention_runs is None
    assert s.retention_logs is None
    assert s.log_format == "console"
    assert s.enabled_unsafe_blocks == []
    assert s.worker_tags == []


def test_environment_spellings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIRIGENT_ENABLED_UNSAFE_BLOCKS", "docker.run, shell.exec")
    monkeypatch.setenv("DIRIGENT_WORKER_TAGS", '["gpu", "eu"]')
    monkeypatch.setenv("DIRIGENT_INLINE_ARTIFACT_MAX", "1mb")
    monkeypatch.setenv("DIRIGENT_POLL_INTERVAL", "250ms")
    monkeypatch.setenv("DIRIGENT_LEASE_DURATION", "2m")
    monkeypatch.setenv("DIRIGENT_RETENTION_LOGS", "30d")
    monkeypatch.setenv("DIRIGENT_LOG_FORMAT", "json")
    s = EngineSettings()
    assert s.enabled_unsafe_blocks == ["docker.run", "shell.exec"]
    assert s.worker_tags == ["gpu", "eu"]
    assert s.inline_artifact_max == 1024 * 1024
    assert s.poll_interval == 0.25
    assert s.lease_duration == dt.timedelta(minutes=2)
    assert s.retention_logs == dt.timedelta(days=30)
    assert s.log_format == "json"


@pytest.mark.parametrize(
    "text",
    [
        KEY.hex(),
        KEY.hex().upper(),
        base64.b64encode(KEY).decode(),
        base64.urlsafe_b64encode(KEY).decode().rstrip("="),
    ],
)
def test_secret_key_forms(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIRIGENT_SECRET_KEY", text)
    assert EngineSettings().secret_key_bytes() == KEY


@pytest.mark.parametrize(
    ("text", "message"),
    [("not a key!", "neither"), (base64.b64encode(b"short").decode(), "decodes to 5")],
)
def test_malformed_secret_key_is_refused_without_echo(text: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message) as caught:
        EngineSettings(secret_key=text)
    assert text not in str(caught.value)


def test_missing_secret_key_is_explained() -> None:
    with pytest.raises(ValueError, match="DIRIGENT_SECRET_KEY is not set"):
        EngineSettings().secret_key_bytes()


def test_heartbeat_must_be_shorter_than_lease() -> None:
    with pytest.raises(ValidationError, match="shorter than"):
        EngineSettings(lease_duration="10s", heartbeat_interval="10s")


def test_decode_rejects_hex_of_wrong_length() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        decode_secret_key("ab" * 16)


def test_a_pooler_url_without_a_direct_url_is_warned_about() -> None:
    from dirigent.engine import pooler_warning

    def settings(url: str, direct: str | None = None) -> EngineSettings:
        return EngineSettings(database_url=url, database_direct_url=direct, metrics_port=None)

    pgbouncer = "postgresql+asyncpg://app@db-pgbouncer.data:5432/dirigent"
    by_port = "postgresql+asyncpg://app@10.0.0.7:6432/dirigent"
    for url in (pgbouncer, by_port):
        warning = pooler_warning(settings(url))
        assert warning is not None and "DIRIGENT_DATABASE_DIRECT_URL is not set" in warning
        assert "app@" not in warning  # the host and port, never credentials
    assert pooler_warning(settings(pgbouncer, direct="postgresql://db:5432/dirigent")) is None
    assert pooler_warning(settings("postgresql+asyncpg://db.data:5432/dirigent")) is None


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("/var/lib/dirigent/artifacts", "/var/lib/dirigent/artifacts"),
        ("file:///var/lib/dirigent/artifacts", "file:///var/lib/dirigent/artifacts"),
        ("s3://bucket/prefix", "s3://bucket/prefix"),
        ("  s3://bucket  ", "s3://bucket"),
    ],
)
def test_the_artifact_root_is_a_folder_or_a_uri(
    given: str, kept: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIRIGENT_ARTIFACT_ROOT", given)
    assert EngineSettings().artifact_root == kept


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("", "not empty"),
        ("S3://bucket", "is not a URI scheme"),
        ("s3://", "names no bucket"),
    ],
)
def test_an_artifact_root_that_is_neither_is_refused(given: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        EngineSettings(artifact_root=given)


def test_the_artifact_connection_names_namespace_and_name() -> None:
    assert EngineSettings(artifact_connection="dirigent-system/artifacts").artifact_connection
    for bad in ("artifacts", "a/b/c", "Team/x"):
        with pytest.raises(ValidationError, match=r"<namespace>/<name>"):
            EngineSettings(artifact_connection=bad)
