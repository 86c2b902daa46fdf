"""Fixtures for the S3 backend's tests: the harness's real SeaweedFS server, a store on it.

Why a prefix per test: the session shares one server and one bucket (starting a server
costs seconds); each test writes under its own random prefix, so tests never see each
other's objects. The instance-metadata lookup is switched off for the whole session: no
test may reach for credentials beyond this machine.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from dirigent.storage.s3 import S3Settings
from dirigent.storage.s3.client import open_store
from dirigent.storage.s3.store import S3Store
from e2e.harness.s3 import S3Endpoint, ensure_weed, uses_s3
from e2e.harness.s3 import s3_server as s3_server  # the real S3 server, a session fixture

HERE = Path(__file__).parent


def pytest_collection_finish(session: pytest.Session) -> None:
    # A cold build takes minutes: here, before any test's timeout starts.
    if uses_s3(session) or any(HERE in Path(str(item.path)).parents for item in session.items):
        ensure_weed()


@pytest.fixture(scope="session", autouse=True)
def _no_instance_metadata() -> Iterator[None]:
    previous = os.environ.get("AWS_EC2_METADATA_DISABLED")
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    yield
    if previous is None:
        os.environ.pop("AWS_EC2_METADATA_DISABLED", None)
    else:
        os.environ["AWS_EC2_METADATA_DISABLED"] = previous


def settings_for(endpoint: S3Endpoint, **more: object) -> S3Settings:
    """Explicit settings for the harness's server (what a Connection of kind s3 holds)."""
    return S3Settings.model_validate(
        {
            "endpoint_url": endpoint.url,
            "region": endpoint.region,
            "access_key_id": endpoint.access_key,
            "secret_access_key": endpoint.secret_key,
            **more,
        }
    )


SettingsFor = Callable[..., S3Settings]


@pytest.fixture
def s3_settings(s3_server: S3Endpoint) -> SettingsFor:
    """``s3_settings(part_size="5mb", ...)``: explicit settings for the session's server."""
    return lambda **more: settings_for(s3_server, **more)


@pytest.fixture
async def store(s3_server: S3Endpoint) -> AsyncIterator[S3Store]:
    async with open_store(settings_for(s3_server, part_size="5mb")) as opened:
        yield opened


@pytest.fixture
def base(s3_server: S3Endpoint) -> str:
    """This test's own prefix in the session's bucket, ending in ``/``."""
    return f"s3://{s3_server.bucket}/t-{uuid.uuid4().hex[:10]}/"
