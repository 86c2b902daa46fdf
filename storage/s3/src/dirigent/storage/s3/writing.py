"""Streamed writes: one PUT for a small object, a multipart upload for a large one.

Why this shape: a writer does not know how much will come. It buffers up to one part; if the
stream ends first, the object goes up in a single ``PutObject`` (with its SHA-256 in the
object's metadata, so ``stat`` reports it later). Otherwise the first full part starts a
multipart upload and each further full part is uploaded as it fills, with at most
``max_concurrency`` parts in flight: memory stays at ``(max_concurrency + 1) × part_size``
whatever the object's size. Every request carries a checksum (``settings.checksum``) that
the server verifies, and each part's checksum goes into the completion.

All or nothing: the object exists only once ``CompleteMultipartUpload`` (or the single PUT)
succeeds; an exception, a cancellation or a byte count differing from the announced size
aborts the upload, so no part is left behind to be billed. S3 allows 10,000 parts: with a
known size the part size grows to fit; without one the writer fails clearly at the limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
from typing import TYPE_CHECKING, Any

from dirigent.sdk import ArtifactInfo, StorageError
from dirigent.storage.s3.failures import translating
from dirigent.storage.s3.settings import MAX_PARTS, S3Settings
from dirigent.storage.s3.uris import Location

if TYPE_CHECKING:
    from types_aiobotocore_s3 import S3Client

__all__ = ["S3Writer", "part_size_for"]

_MIB = 1024 * 1024


def part_size_for(settings: S3Settings, size: int | None) -> int:
    """The settings' part size, grown (to whole MiB) when ``size`` needs more than 10,000."""
    part = settings.part_size.bytes
    if size is not None and size > part * MAX_PARTS:
        part = -(-size // MAX_PARTS)
        part = -(-part // _MIB) * _MIB
    return part


class S3Writer:
    """An ``ObjectWriter`` for one key; ``finish`` on a clean exit, ``abort`` otherwise."""

    def __init__(
        self,
        client: S3Client,
        location: Location,
        content_type: str,
        size: int | None,
        settings: S3Settings,
        where: str,
    ) -> None:
        self._client = client
        self._location = location
        self._content_type = content_type
        self._size = size
        self._settings = settings
        self._where = where
        self._part_size = part_size_for(settings, size)
        # The part being filled. A BytesIO that owns its bytes goes to the HTTP layer as it
        # is (bytes would be wrapped in a BytesIO, and the first look at its buffer copies).
        self._buffer = io.BytesIO()
        self._digest = hashlib.sha256()
        self._written = 0
        self._upload_id: str | None = None
        self._parts: dict[int, dict[str, Any]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._slots = asyncio.Semaphore(settings.max_concurrency)
        self.info: ArtifactInfo | None = None

    @property
    def _uri(self) -> str:
        return self._location.uri

    async def write(self, data: bytes) -> None:
        self._digest.update(data)
        self._written += len(data)
        if self._size is not None and self._written > self._size:
            raise StorageError(f"{self._uri}: more than the announced {self._size} bytes written")
        view = memoryview(data)
        while view:
            room = self._part_size - self._buffer.tell()
            self._buffer.write(view[:room])
            view = view[room:]
            if self._buffer.tell() == self._part_size:
                full, self._buffer = self._buffer, io.BytesIO()
                await self._send_part(full)

    async def finish(self) -> ArtifactInfo:
        """Make the object appear: one PUT, or the last part and the completion."""
        if self._size is not None and self._written != self._size:
            raise StorageError(
                f"{self._uri}: {self._written} bytes written, {self._size} announced"
            )
        if self._upload_id is None:
            etag = await self._put_whole()
        else:
            if self._buffer.tell():
                last, self._buffer = self._buffer, io.BytesIO()
                await self._send_part(last)
            await asyncio.gather(*self._tasks)
            etag = await self._complete()
        self.info = ArtifactInfo(
            uri=self._uri,
            size=self._written,
            content_type=self._content_type,
            sha256=self._digest.hexdigest(),
            etag=etag,
        )
        return self.info

    async def abort(self) -> None:
        """Stop the parts in flight and abort the upload; never raises (the cause does)."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._buffer = io.BytesIO()
        if self._upload_id is not None:
            with contextlib.suppress(Exception):
                await self._client.abort_multipart_upload(
                    Bucket=self._location.bucket, Key=self._location.key, UploadId=self._upload_id
                )

    async def _put_whole(self) -> str | None:
        with translating(self._uri, self._where):
            response = await self._client.put_object(
                Bucket=self._location.bucket,
                Key=self._location.key,
                Body=_rewound(self._buffer),
                ContentType=self._content_type,
                Metadata={"sha256": self._digest.hexdigest()},
                ChecksumAlgorithm=self._settings.checksum,
            )
        self._buffer = io.BytesIO()
        return _etag(response)

    async def _send_part(self, data: io.BytesIO) -> None:
        if self._upload_id is None:
            with translating(self._uri, self._where):
                created = await self._client.create_multipart_upload(
                    Bucket=self._location.bucket,
                    Key=self._location.key,
                    ContentType=self._content_type,
                    ChecksumAlgorithm=self._settings.checksum,
                )
            self._upload_id = created["UploadId"]
        number = len(self._tasks) + 1
        if number > MAX_PARTS:
            raise StorageError(
                f"{self._uri}: larger than {MAX_PARTS} parts of {self._part_size} bytes; "
                "announce the size when opening the writer, or raise part_size"
            )
        await self._slots.acquire()  # at most max_concurrency parts in memory and in flight
        failed = [t for t in self._tasks if t.done() and t.exception() is not None]
        if failed:
            self._slots.release()
            await failed[0]  # re-raises the part's error
        self._tasks.append(asyncio.create_task(self._upload(number, data)))

    async def _upload(self, number: int, data: io.BytesIO) -> None:
        assert self._upload_id is not None
        try:
            with translating(self._uri, self._where):
                response = await self._client.upload_part(
                    Bucket=self._location.bucket,
                    Key=self._location.key,
                    UploadId=self._upload_id,
                    PartNumber=number,
                    Body=_rewound(data),
                    ChecksumAlgorithm=self._settings.checksum,
                )
        finally:
            self._slots.release()
        part: dict[str, Any] = {"PartNumber": number, "ETag": response["ETag"]}
        checksum_key = f"Checksum{self._settings.checksum}"
        found: Any = response
        if found.get(checksum_key):
            part[checksum_key] = found[checksum_key]
        self._parts[number] = part

    async def _complete(self) -> str | None:
        assert self._upload_id is not None
        parts: Any = [self._parts[n] for n in sorted(self._parts)]
        with translating(self._uri, self._where):
            response = await self._client.complete_multipart_upload(
                Bucket=self._location.bucket,
                Key=self._location.key,
                UploadId=self._upload_id,
                MultipartUpload={"Parts": parts},
            )
        self._upload_id = None  # completed: nothing left to abort
        return _etag(response)


def _rewound(buffer: io.BytesIO) -> io.BytesIO:
    buffer.seek(0)
    return buffer


def _etag(response: Any) -> str | None:
    etag = response.get("ETag")
    return etag.strip('"') if isinstance(etag, str) else None
