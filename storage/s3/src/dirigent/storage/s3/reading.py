"""Ranged reads that survive a dropped connection.

Why resume: botocore retries a request until its response starts, but a body that breaks
half-way (a proxy's idle timeout, a restarted server) surfaces as an error in the middle of
a 1 GiB copy. ``S3Reader`` then asks again for the bytes it has not yet yielded (``Range``
from where it stopped, ``If-Match`` the first response's ETag, so a replaced object is
never stitched to the old one's head), up to the settings' ``max_attempts``.

Opening issues the GET before anything is yielded, so a missing object, a refused
request, an unreachable endpoint or a range past the end raise from ``open_read`` itself.
"""

from __future__ import annotations

import mimetypes
import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import aiohttp
from botocore import exceptions as boto

from dirigent.sdk import DEFAULT_CHUNK_SIZE, ArtifactInfo, InvalidRange, StorageError
from dirigent.storage.s3.failures import error_code, translate, translating
from dirigent.storage.s3.uris import Location

if TYPE_CHECKING:
    from types_aiobotocore_s3 import S3Client

__all__ = ["S3Reader", "info_from_head", "open_object"]

_DROPPED = (
    boto.ResponseStreamingError,
    boto.ReadTimeoutError,
    boto.IncompleteReadError,
    aiohttp.ClientPayloadError,
    ConnectionError,
    TimeoutError,
)
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+)$")


def _content_type(value: Any, key: str) -> str:
    if isinstance(value, str) and value:
        return value
    return mimetypes.guess_type(key)[0] or "application/octet-stream"


def info_from_head(location: Location, response: Any, size: int | None = None) -> ArtifactInfo:
    """What a HEAD or GET response says about the whole object."""
    metadata = response.get("Metadata") or {}
    etag = response.get("ETag")
    return ArtifactInfo(
        uri=location.uri,
        size=int(response["ContentLength"] if size is None else size),
        content_type=_content_type(response.get("ContentType"), location.key),
        sha256=metadata.get("sha256"),
        etag=etag.strip('"') if isinstance(etag, str) else None,
        modified_at=response.get("LastModified"),
    )


class S3Reader:
    """An opened object (``ObjectReader``): its info, the range, chunks that resume."""

    def __init__(
        self,
        client: S3Client,
        location: Location,
        info: ArtifactInfo,
        span: tuple[int, int],
        body: Any,
        where: str,
        attempts: int,
    ) -> None:
        self._client = client
        self._location = location
        self._info = info
        self._offset, self._length = span
        self._body = body
        self._where = where
        self._attempts = attempts
        self._consumed = False

    @property
    def info(self) -> ArtifactInfo:
        return self._info

    @property
    def offset(self) -> int:
        return self._offset

    @property
    def length(self) -> int:
        return self._length

    async def chunks(self, size: int = DEFAULT_CHUNK_SIZE) -> AsyncIterator[bytes]:
        if self._consumed:
            raise StorageError(f"{self._info.uri}: a reader's chunks are read once")
        self._consumed = True
        done, failures = 0, 0
        while done < self._length:
            try:
                chunk: bytes = await self._body.read(min(size, self._length - done))
                if not chunk:
                    raise boto.IncompleteReadError(actual_bytes=done, expected_bytes=self._length)
            except _DROPPED as err:
                failures += 1
                if failures >= self._attempts:
                    raise translate(err, self._info.uri, self._where) from err
                await self._resume(self._offset + done)
                continue
            done += len(chunk)
            yield chunk

    async def _resume(self, start: int) -> None:
        self.close()
        last = self._offset + self._length - 1
        request: dict[str, Any] = {
            "Bucket": self._location.bucket,
            "Key": self._location.key,
            "Range": f"bytes={start}-{last}",
        }
        if self._info.etag:
            request["IfMatch"] = f'"{self._info.etag}"'
        try:
            with translating(self._info.uri, self._where):
                response = await self._client.get_object(**request)
        except StorageError as err:
            cause = err.__cause__
            if isinstance(cause, boto.ClientError) and error_code(cause)[1] == 412:
                raise StorageError(f"{self._info.uri} changed while it was being read") from None
            raise
        self._body = response["Body"]

    def close(self) -> None:
        if self._body is not None:
            self._body.close()
            self._body = None


async def open_object(
    client: S3Client,
    location: Location,
    span: tuple[int, int | None],
    where: str,
    attempts: int,
) -> S3Reader:
    """GET the object (or its range); raises before any byte if it cannot be read."""
    offset, length = span
    if offset < 0 or (length is not None and length < 0):
        raise InvalidRange(f"{location.uri}: offset and length must not be negative")
    request: dict[str, Any] = {"Bucket": location.bucket, "Key": location.key}
    if length == 0:
        return await _empty(client, location, offset, where, attempts)
    if offset or length is not None:
        request["Range"] = f"bytes={offset}-{'' if length is None else offset + length - 1}"
    else:
        request["ChecksumMode"] = "ENABLED"  # whole objects are checked against their checksum
    try:
        with translating(location.uri, where):
            response = await client.get_object(**request)
    except InvalidRange:
        return await _empty(client, location, offset, where, attempts)
    total = _total_size(response)
    info = info_from_head(location, response, size=total)
    served = int(response["ContentLength"])
    return S3Reader(client, location, info, (offset, served), response["Body"], where, attempts)


def _total_size(response: Any) -> int:
    found = _CONTENT_RANGE.match(str(response.get("ContentRange") or ""))
    return int(found.group(3)) if found else int(response["ContentLength"])


async def _empty(
    client: S3Client, location: Location, offset: int, where: str, attempts: int
) -> S3Reader:
    """A zero-byte read: the object must exist and ``offset`` must not pass its end."""
    with translating(location.uri, where):
        head = await client.head_object(Bucket=location.bucket, Key=location.key)
    info = info_from_head(location, head)
    if offset > info.size:
        raise InvalidRange(f"{location.uri}: offset {offset} is past its {info.size} bytes")
    return S3Reader(client, location, info, (offset, 0), None, where, attempts)
