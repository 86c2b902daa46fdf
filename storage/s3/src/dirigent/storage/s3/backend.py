"""The ``s3`` scheme and the ``s3`` connection kind, as the plugin contributes them.

Why so little here: the host imports every plugin at start, so this module and the plugin
import only pydantic and the SDK; the S3 client (``client``: aiobotocore, botocore, aiohttp)
is imported when a store is first opened. The connection check asks one question
(HeadBucket on the configured bucket, else ListBuckets) and changes nothing.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import ClassVar

from pydantic import BaseModel

from dirigent.sdk import ConnectionKind, HealthReport, ObjectStore, StorageBackend, StorageError
from dirigent.storage.s3.settings import S3Settings, resolve

__all__ = ["S3Backend", "S3ConnectionKind"]


class S3Backend(StorageBackend[S3Settings]):
    """``s3://bucket/key`` on AWS S3 or any S3-compatible server."""

    scheme: ClassVar[str] = "s3"
    summary: ClassVar[str] = "Objects on S3 or an S3-compatible server (s3://bucket/key)."
    config_model: ClassVar[type[BaseModel]] = S3Settings
    connection_kind: ClassVar[str | None] = "s3"

    def open(self, config: S3Settings | None) -> AbstractAsyncContextManager[ObjectStore]:
        return _opened(config)


@asynccontextmanager
async def _opened(config: S3Settings | None) -> AsyncIterator[ObjectStore]:
    from dirigent.storage.s3.client import open_store

    async with open_store(config) as store:
        yield store


class S3ConnectionKind(ConnectionKind[S3Settings]):
    """A Connection of kind ``s3``: endpoint, region, path style, key and secret."""

    id: ClassVar[str] = "s3"
    summary: ClassVar[str] = "An S3 or S3-compatible object store (the s3:// storage backend)."
    config_model: ClassVar[type[BaseModel]] = S3Settings

    async def check(self, config: S3Settings) -> HealthReport:
        from dirigent.storage.s3.client import open_client
        from dirigent.storage.s3.failures import translating

        began = time.monotonic()
        resolved = resolve(config)
        target = f"s3://{config.bucket}" if config.bucket else resolved.where
        try:
            async with open_client(resolved) as client:
                with translating(target, resolved.where):
                    if config.bucket:
                        await client.head_bucket(Bucket=config.bucket)
                    else:
                        await client.list_buckets()
        except StorageError as err:
            return HealthReport(ok=False, message=str(err))
        latency = int((time.monotonic() - began) * 1000)
        return HealthReport(ok=True, message=f"{target} answered", latency_ms=latency)
