"""Opening an S3 client and store: aiobotocore, configured from resolved settings.

Why aiobotocore: it is botocore (AWS's own request signing, endpoint rules, retry modes,
flexible checksums and credential chain, web identity included) on aiohttp, kept in step
with botocore releases; the README weighs it against the other candidates. One client per
store: its connection pool is shared by every read and write the store serves, and closing
the store closes the pool.

Retries are botocore's ``standard`` mode: throttling, 5xx, timeouts and connection failures
are retried with jittered exponential backoff up to ``max_attempts``; a 4xx other than
throttling is final at once. This module is imported only when a store is opened, so
discovering the plugin does not load botocore and aiohttp into every process.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from aiobotocore.config import AioConfig
from aiobotocore.session import get_session

from dirigent.storage.s3.failures import translating
from dirigent.storage.s3.settings import ResolvedSettings, S3Settings, resolve
from dirigent.storage.s3.store import S3Store

if TYPE_CHECKING:
    from types_aiobotocore_s3 import S3Client

__all__ = ["open_client", "open_store"]


def _config(resolved: ResolvedSettings) -> AioConfig:
    settings = resolved.settings
    return AioConfig(
        region_name=resolved.region,
        signature_version="s3v4",
        s3={"addressing_style": "path" if resolved.path_style else "virtual"},
        retries={"mode": "standard", "max_attempts": settings.max_attempts},
        connect_timeout=settings.connect_timeout,
        read_timeout=settings.read_timeout,
        max_pool_connections=max(10, 2 * settings.max_concurrency),
        request_checksum_calculation="when_supported",
        response_checksum_validation="when_supported",
    )


@asynccontextmanager
async def open_client(resolved: ResolvedSettings) -> AsyncIterator[S3Client]:
    """An S3 client with explicit credentials when given, else the ambient chain's."""
    settings = resolved.settings
    explicit: dict[str, Any] = {}
    if settings.access_key_id is not None and settings.secret_access_key is not None:
        explicit = {
            "aws_access_key_id": settings.access_key_id,
            "aws_secret_access_key": settings.secret_access_key.get_secret_value(),
        }
        if settings.session_token is not None:
            explicit["aws_session_token"] = settings.session_token.get_secret_value()
    session = get_session()
    creator: Any = session.create_client(
        "s3",
        endpoint_url=resolved.endpoint_url,
        region_name=resolved.region,
        config=_config(resolved),
        **explicit,
    )
    with translating(resolved.where, resolved.where):
        client: S3Client = await creator.__aenter__()
    try:
        yield client
    finally:
        await creator.__aexit__(None, None, None)


@asynccontextmanager
async def open_store(settings: S3Settings | None = None) -> AsyncIterator[S3Store]:
    """An ``S3Store`` for ``settings`` (None: everything from the environment)."""
    resolved = resolve(settings)
    async with open_client(resolved) as client:
        yield S3Store(client, resolved)
