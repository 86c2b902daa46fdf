"""The storage plugin surface: what a backend declares, what the base class gives it for free.

A small in-memory ``ObjectStore`` stands in for a backend here: it is the contract written
out once (five methods), so the defaults built on it (copy, exists, read/write bytes,
``stream_copy`` between two stores) are checked without a server. Real backends are tested
against their real servers (``storage/s3/tests``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from dirigent.sdk import (
    ArtifactInfo,
    Contribution,
    ErrorClass,
    InvalidRange,
    ObjectNotFound,
    ObjectReader,
    ObjectStore,
    ObjectWriter,
    StorageBackend,
    StorageRefused,
    StorageUnavailable,
    classify_default,
    glob_prefix,
    stream_copy,
)


@dataclass
class _Reader:
    info: ArtifactInfo
    offset: int
    length: int
    data: bytes

    async def chunks(self, size: int = 1 << 20) -> AsyncIterator[bytes]:
        view = self.data[self.offset : self.offset + self.length]
        for start in range(0, len(view), size):
            yield view[start : start + size]


@dataclass
class _Writer:
    uri: str
    content_type: str
    parts: list[bytes] = field(default_factory=list)
    info: ArtifactInfo | None = None

    async def write(self, data: bytes) -> None:
        self.parts.append(data)


class MemoryStore(ObjectStore):
    """``mem://`` objects in a dict: the contract's five methods and nothing more."""

    def __init__(self) -> None:
        self.objects: dict[str, tuple[bytes, str]] = {}
        self.largest_write = 0

    def _check(self, uri: str) -> None:
        if not uri.startswith("mem://"):
            raise StorageRefused(f"{uri}: only mem:// is served here")

    async def stat(self, uri: str) -> ArtifactInfo | None:
        self._check(uri)
        found = self.objects.get(uri)
        return (
            None
            if found is None
            else ArtifactInfo(uri=uri, size=len(found[0]), content_type=found[1])
        )

    def open_read(
        self, uri: str, *, offset: int = 0, length: int | None = None
    ) -> AbstractAsyncContextManager[ObjectReader]:
        return self._open_read(uri, offset, length)

    @asynccontextmanager
    async def _open_read(
        self, uri: str, offset: int, length: int | None
    ) -> AsyncIterator[ObjectReader]:
        info = await self.stat(uri)
        if info is None:
            raise ObjectNotFound(uri)
        if offset > info.size:
            raise InvalidRange(f"{uri}: offset {offset} is past its {info.size} bytes")
        size = info.size - offset if length is None else min(length, info.size - offset)
        yield _Reader(info, offset, size, self.objects[uri][0])

    def open_write(
        self, uri: str, *, content_type: str = "application/octet-stream", size: int | None = None
    ) -> AbstractAsyncContextManager[ObjectWriter]:
        return self._open_write(uri, content_type, size)

    @asynccontextmanager
    async def _open_write(
        self, uri: str, content_type: str, size: int | None
    ) -> AsyncIterator[ObjectWriter]:
        self._check(uri)
        writer = _Writer(uri, content_type)
        yield writer
        data = b"".join(writer.parts)
        if size is not None and len(data) != size:
            raise ValueError(f"{uri}: {len(data)} bytes written, {size} announced")
        self.largest_write = max([self.largest_write, *map(len, writer.parts)])
        self.objects[uri] = (data, content_type)
        writer.info = ArtifactInfo(uri=uri, size=len(data), content_type=content_type)

    async def list(
        self, prefix: str, *, start_after: str | None = None, page_size: int = 1000
    ) -> AsyncIterator[Sequence[ArtifactInfo]]:
        uris = sorted(u for u in self.objects if u.startswith(prefix) and u > (start_after or ""))
        for start in range(0, len(uris), page_size):
            page = []
            for uri in uris[start : start + page_size]:
                info = await self.stat(uri)
                assert info is not None
                page.append(info)
            yield page

    async def delete(self, uri: str) -> None:
        self._check(uri)
        self.objects.pop(uri, None)


class MemorySettings(BaseModel):
    name: str = "default"


class MemoryBackend(StorageBackend[MemorySettings]):
    scheme: ClassVar[str] = "mem"
    summary: ClassVar[str] = "Objects in a dict."
    config_model: ClassVar[type[BaseModel]] = MemorySettings

    def open(self, config: MemorySettings | None) -> AbstractAsyncContextManager[ObjectStore]:
        return self._open()

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[ObjectStore]:
        yield MemoryStore()


async def test_the_base_class_builds_bytes_copy_and_exists_on_the_five_methods() -> None:
    store = MemoryStore()
    info = await store.write_bytes("mem://a/1.json", b'{"x": 1}', "application/json")
    assert info == ArtifactInfo(uri="mem://a/1.json", size=8, content_type="application/json")
    assert await store.exists("mem://a/1.json")
    assert not await store.exists("mem://a/2.json")
    copied = await store.copy("mem://a/1.json", "mem://b/1.json")
    assert copied.content_type == "application/json"
    assert await store.read_bytes("mem://b/1.json") == b'{"x": 1}'
    with pytest.raises(ObjectNotFound):
        await store.read_bytes("mem://a/missing")


async def test_stream_copy_moves_one_chunk_at_a_time_between_stores() -> None:
    source, target = MemoryStore(), MemoryStore()
    await source.write_bytes("mem://big", bytes(range(256)) * 1000)
    info = await stream_copy(source, "mem://big", target, "mem://copy", chunk_size=4096)
    assert info.size == 256_000
    assert target.largest_write == 4096
    assert await target.read_bytes("mem://copy") == bytes(range(256)) * 1000


async def test_a_failed_copy_leaves_nothing_at_the_target() -> None:
    source, target = MemoryStore(), MemoryStore()
    with pytest.raises(ObjectNotFound):
        await stream_copy(source, "mem://absent", target, "mem://copy")
    assert target.objects == {}


async def test_a_backend_opens_a_store() -> None:
    async with MemoryBackend().open(None) as store:
        await store.write_bytes("mem://x", b"1")
        pages = [[i.uri for i in page] async for page in store.list("mem://")]
    assert pages == [["mem://x"]]


@pytest.mark.parametrize(
    ("pattern", "prefix", "matches", "misses"),
    [
        ("s3://b/in/", "s3://b/in/", None, None),
        (
            "s3://b/in/*.csv",
            "s3://b/in/",
            ["s3://b/in/a.csv"],
            ["s3://b/in/x/a.csv", "s3://b/in/a.csvx"],
        ),
        (
            "s3://b/in/**.csv",
            "s3://b/in/",
            ["s3://b/in/a.csv", "s3://b/in/x/y/a.csv"],
            ["s3://b/out/a.csv"],
        ),
        ("s3://b/day-?/x", "s3://b/day-", ["s3://b/day-1/x"], ["s3://b/day-10/x", "s3://b/day-/x"]),
        ("file:///r/a+b(1)/*", "file:///r/a+b(1)/", ["file:///r/a+b(1)/z"], ["file:///r/aab(1)/z"]),
    ],
)
def test_glob_prefix_lists_the_literal_prefix_and_matches_whole_uris(
    pattern: str, prefix: str, matches: list[str] | None, misses: list[str] | None
) -> None:
    got_prefix, regex = glob_prefix(pattern)
    assert got_prefix == prefix
    if matches is None:
        assert regex is None
        return
    assert regex is not None
    assert all(regex.match(u) for u in matches)
    assert not any(regex.match(u) for u in misses or [])


def test_storage_errors_are_sorted_like_the_builtins_they_extend() -> None:
    assert classify_default(StorageRefused("s3://b/k: access denied")) is ErrorClass.REJECTED
    assert (
        classify_default(StorageUnavailable("http://127.0.0.1:1 unreachable"))
        is ErrorClass.TRANSIENT
    )
    assert isinstance(ObjectNotFound("s3://b/k"), FileNotFoundError)
    assert isinstance(InvalidRange("s3://b/k"), ValueError)


def test_a_contribution_carries_storage_backends() -> None:
    backend = MemoryBackend()
    contribution = Contribution(storage_backends=[backend])
    assert contribution.storage_backends == (backend,)


def _backend(**attrs: Any) -> StorageBackend[Any]:
    cls = type("Odd", (MemoryBackend,), attrs)
    instance: StorageBackend[Any] = cls()
    return instance


@pytest.mark.parametrize(
    ("backends", "error", "says"),
    [
        ([object()], TypeError, "not an instance of StorageBackend"),
        ([_backend(scheme="S3")], TypeError, "lower-case URI scheme"),
        ([_backend(scheme="s3://")], TypeError, "lower-case URI scheme"),
        ([_backend(scheme="file")], ValueError, "the host's own"),
        ([MemoryBackend(), MemoryBackend()], ValueError, "contributed twice"),
        ([_backend(config_model=dict)], TypeError, "config_model must be a pydantic model"),
        ([_backend(connection_kind="S3 Kind")], TypeError, "connection_kind"),
    ],
)
def test_a_contribution_refuses_a_badly_declared_backend(
    backends: list[Any], error: type[Exception], says: str
) -> None:
    with pytest.raises(error, match=says):
        Contribution(storage_backends=backends)
