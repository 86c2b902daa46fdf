"""``S3Store``: the SDK's ``ObjectStore`` over one S3 client.

Why each operation is the request it is: ``stat`` is a HEAD (404 is an answer, not an
error); reads are GETs with a ``Range`` (``reading``); writes are a PUT or a multipart
upload (``writing``); ``list`` is ListObjectsV2, whose pages come sorted by key in UTF-8
byte order, so ``start_after`` maps onto S3's ``StartAfter`` directly; ``delete`` is
DeleteObject, which S3 answers 204 for a missing key too; ``copy`` stays on the server
(CopyObject, or UploadPartCopy part by part above ``copy_part_threshold``), so copying a
large object inside S3 moves no byte through the worker.

Keys ending in ``/`` are folder markers some tools create; they are not objects and are
never listed.
"""

from __future__ import annotations

import asyncio
import mimetypes
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

from dirigent.sdk import (
    DEFAULT_CONTENT_TYPE,
    ArtifactInfo,
    ObjectNotFound,
    ObjectReader,
    ObjectStore,
    ObjectWriter,
    StorageRefused,
)
from dirigent.storage.s3.failures import translating
from dirigent.storage.s3.reading import info_from_head, open_object
from dirigent.storage.s3.settings import ResolvedSettings
from dirigent.storage.s3.uris import Location, parse
from dirigent.storage.s3.writing import S3Writer, part_size_for

if TYPE_CHECKING:
    from types_aiobotocore_s3 import S3Client

__all__ = ["S3Store"]


class S3Store(ObjectStore):
    """Objects at ``s3://bucket/key`` through one client (its connection pool, its identity)."""

    def __init__(self, client: S3Client, resolved: ResolvedSettings) -> None:
        self.client = client
        self.resolved = resolved
        self.settings = resolved.settings
        self.where = resolved.where

    async def stat(self, uri: str) -> ArtifactInfo | None:
        location = parse(uri)
        try:
            with translating(uri, self.where):
                head = await self.client.head_object(Bucket=location.bucket, Key=location.key)
        except ObjectNotFound:
            return None
        return info_from_head(location, head)

    def open_read(
        self, uri: str, *, offset: int = 0, length: int | None = None
    ) -> AbstractAsyncContextManager[ObjectReader]:
        return self._open_read(parse(uri), offset, length)

    @asynccontextmanager
    async def _open_read(
        self, location: Location, offset: int, length: int | None
    ) -> AsyncIterator[ObjectReader]:
        reader = await open_object(
            self.client, location, (offset, length), self.where, self.settings.max_attempts
        )
        try:
            yield reader
        finally:
            reader.close()

    def open_write(
        self, uri: str, *, content_type: str = DEFAULT_CONTENT_TYPE, size: int | None = None
    ) -> AbstractAsyncContextManager[ObjectWriter]:
        return self._open_write(parse(uri), content_type, size)

    @asynccontextmanager
    async def _open_write(
        self, location: Location, content_type: str, size: int | None
    ) -> AsyncIterator[ObjectWriter]:
        writer = S3Writer(self.client, location, content_type, size, self.settings, self.where)
        try:
            yield writer
            await writer.finish()
        except BaseException:
            await asyncio.shield(writer.abort())
            raise

    async def list(
        self, prefix: str, *, start_after: str | None = None, page_size: int = 1000
    ) -> AsyncIterator[Sequence[ArtifactInfo]]:
        where = parse(prefix, object_key=False)
        request: dict[str, Any] = {
            "Bucket": where.bucket,
            "Prefix": where.key,
            "MaxKeys": max(1, min(page_size, 1000)),
        }
        if start_after is not None:
            after = parse(start_after, object_key=False)
            if after.bucket != where.bucket:
                raise StorageRefused(f"{start_after}: not in the bucket of {prefix}")
            if after.key >= where.key:
                request["StartAfter"] = after.key
        while True:
            with translating(prefix, self.where):
                response: Any = await self.client.list_objects_v2(**request)
            page = [
                _listed(where.sibling(item["Key"]), item)
                for item in response.get("Contents", [])
                if not item["Key"].endswith("/")
            ]
            if page:
                yield page
            if not response.get("IsTruncated"):
                return
            request.pop("StartAfter", None)
            request["ContinuationToken"] = response["NextContinuationToken"]

    async def delete(self, uri: str) -> None:
        location = parse(uri)
        try:
            with translating(uri, self.where):
                await self.client.delete_object(Bucket=location.bucket, Key=location.key)
        except ObjectNotFound:
            return

    async def copy(self, source: str, target: str) -> ArtifactInfo:
        """Server-side: no byte passes through this process."""
        src, dst = parse(source), parse(target)
        info = await self.stat(source)
        if info is None:
            raise ObjectNotFound(f"{source} does not exist")
        if src == dst:
            return info
        if info.size <= self.settings.copy_part_threshold.bytes:
            with translating(target, self.where):
                await self.client.copy_object(
                    Bucket=dst.bucket,
                    Key=dst.key,
                    CopySource={"Bucket": src.bucket, "Key": src.key},
                    MetadataDirective="COPY",
                )
        else:
            await self._copy_in_parts(src, dst, info)
        copied = await self.stat(target)
        if copied is None:  # the server acknowledged a copy it does not show
            raise ObjectNotFound(f"{target} is missing right after the copy from {source}")
        return copied

    async def _copy_in_parts(self, src: Location, dst: Location, info: ArtifactInfo) -> None:
        with translating(dst.uri, self.where):
            head: Any = await self.client.head_object(Bucket=src.bucket, Key=src.key)
            created = await self.client.create_multipart_upload(
                Bucket=dst.bucket,
                Key=dst.key,
                ContentType=info.content_type,
                Metadata=head.get("Metadata") or {},
            )
        upload_id = created["UploadId"]
        part = part_size_for(self.settings, info.size)
        ranges = [(start, min(start + part, info.size) - 1) for start in range(0, info.size, part)]
        slots = asyncio.Semaphore(self.settings.max_concurrency * 2)

        # Every part copies the version stat saw: a source replaced mid-copy fails the copy.
        same_version: Any = {"CopySourceIfMatch": f'"{info.etag}"'} if info.etag else {}

        async def one(number: int, first: int, last: int) -> dict[str, Any]:
            async with slots:
                with translating(dst.uri, self.where):
                    answer = await self.client.upload_part_copy(
                        Bucket=dst.bucket,
                        Key=dst.key,
                        UploadId=upload_id,
                        PartNumber=number,
                        CopySource={"Bucket": src.bucket, "Key": src.key},
                        CopySourceRange=f"bytes={first}-{last}",
                        **same_version,
                    )
            return {"PartNumber": number, "ETag": answer["CopyPartResult"]["ETag"]}

        try:
            parts: Any = await asyncio.gather(
                *(one(n, first, last) for n, (first, last) in enumerate(ranges, start=1))
            )
            with translating(dst.uri, self.where):
                await self.client.complete_multipart_upload(
                    Bucket=dst.bucket,
                    Key=dst.key,
                    UploadId=upload_id,
                    MultipartUpload={"Parts": parts},
                )
        except BaseException:
            await asyncio.shield(self._abort(dst, upload_id))
            raise

    async def _abort(self, location: Location, upload_id: str) -> None:
        try:
            await self.client.abort_multipart_upload(
                Bucket=location.bucket, Key=location.key, UploadId=upload_id
            )
        except Exception:  # the copy's own error is what the caller needs to see
            return


def _listed(location: Location, item: Any) -> ArtifactInfo:
    etag = item.get("ETag")
    return ArtifactInfo(
        uri=location.uri,
        size=int(item.get("Size") or 0),
        # Listings carry no content type: guessed from the name, as file:// does.
        content_type=mimetypes.guess_type(location.key)[0] or DEFAULT_CONTENT_TYPE,
        etag=etag.strip('"') if isinstance(etag, str) else None,
        modified_at=item.get("LastModified"),
    )
