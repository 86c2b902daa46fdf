"""The S3 backend against a real S3 server (SeaweedFS from the e2e harness); no mocks.

Each test is one promise of the storage contract (``dirigent.sdk.storage``) kept on S3:
what a write leaves, what a read returns, how listing pages, where a copy happens, and
which error a caller gets when something is wrong.
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from dirigent.sdk import (
    InvalidRange,
    ObjectNotFound,
    StorageError,
    StorageRefused,
    StorageUnavailable,
    stream_copy,
)
from dirigent.storage.s3 import S3ConnectionKind, S3Settings
from dirigent.storage.s3.client import open_store
from dirigent.storage.s3.store import S3Store
from e2e.harness.s3 import S3Endpoint

MiB = 1024 * 1024
SettingsFor = Callable[..., S3Settings]


async def test_put_then_get_and_stat(store: S3Store, base: str) -> None:
    data = b'{"rows": 3}'
    written = await store.write_bytes(base + "in/a.json", data, "application/json")
    assert written.size == len(data)
    assert written.sha256 == hashlib.sha256(data).hexdigest()
    assert await store.read_bytes(base + "in/a.json") == data
    info = await store.stat(base + "in/a.json")
    assert info is not None
    assert (info.size, info.content_type) == (len(data), "application/json")
    assert info.sha256 == written.sha256  # kept in the object's metadata
    assert info.etag == written.etag
    assert info.modified_at is not None
    assert await store.stat(base + "in/missing.json") is None
    assert not await store.exists(base + "in/missing.json")


async def test_ranged_reads_serve_a_slice_and_report_the_whole_object(
    store: S3Store, base: str
) -> None:
    data = bytes(range(256)) * 4  # 1024 bytes
    await store.write_bytes(base + "r.bin", data)

    async def read(offset: int, length: int | None) -> tuple[bytes, int, int]:
        async with store.open_read(base + "r.bin", offset=offset, length=length) as reader:
            body = b"".join([c async for c in reader.chunks(100)])
            return body, reader.info.size, reader.length

    assert await read(100, 50) == (data[100:150], 1024, 50)
    assert await read(1000, 50) == (data[1000:], 1024, 24)  # clipped at the end
    assert await read(1000, None) == (data[1000:], 1024, 24)
    assert await read(1024, None) == (b"", 1024, 0)  # at the end: an empty read
    assert await read(5, 0) == (b"", 1024, 0)
    with pytest.raises(InvalidRange):
        await read(1025, None)


async def test_opening_a_missing_object_fails_before_any_byte(store: S3Store, base: str) -> None:
    with pytest.raises(ObjectNotFound, match="does not exist"):
        async with store.open_read(base + "nothing-here"):
            pytest.fail("opened a missing object")


async def test_an_empty_object_round_trips(store: S3Store, base: str) -> None:
    info = await store.write_bytes(base + "empty", b"")
    assert info.size == 0
    assert await store.read_bytes(base + "empty") == b""
    async with store.open_read(base + "empty", offset=0, length=10) as reader:
        assert reader.length == 0


async def test_list_walks_a_prefix_in_sorted_pages_and_resumes(store: S3Store, base: str) -> None:
    names = [f"day/{i:02d}.csv" for i in range(7)]
    for name in reversed(names):
        await store.write_bytes(base + name, name.encode(), "text/csv")
    await store.write_bytes(base + "other/x.csv", b"x")

    pages = [[i.uri for i in page] async for page in store.list(base + "day/", page_size=3)]
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [u for p in pages for u in p] == [base + n for n in names]
    (first, *_) = pages_of = [i async for page in store.list(base + "day/") for i in page]
    assert len(pages_of) == 7
    assert (first.size, first.content_type) == (len(names[0]), "text/csv")

    later = [
        i.uri async for page in store.list(base + "day/", start_after=base + names[4]) for i in page
    ]
    assert later == [base + n for n in names[5:]]
    assert [p async for p in store.list(base + "nope/")] == []


async def test_delete_removes_and_a_missing_object_is_not_an_error(
    store: S3Store, base: str
) -> None:
    await store.write_bytes(base + "gone", b"1")
    await store.delete(base + "gone")
    assert await store.stat(base + "gone") is None
    await store.delete(base + "gone")


async def test_copy_inside_s3_is_server_side(
    store: S3Store, base: str, s3_settings: SettingsFor, s3_server: S3Endpoint
) -> None:
    data = os.urandom(3 * MiB)
    await store.write_bytes(base + "src.bin", data, "application/x-thing")
    tracemalloc.start()
    try:
        copied = await store.copy(base + "src.bin", base + "copy/dst.bin")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MiB, f"a server-side copy of 3 MiB held {peak} bytes here"
    assert (copied.size, copied.content_type) == (len(data), "application/x-thing")
    assert copied.sha256 == hashlib.sha256(data).hexdigest()  # metadata travels with it
    assert await store.read_bytes(base + "copy/dst.bin") == data

    # Above the threshold it goes part by part (UploadPartCopy), still on the server.
    async with open_store(s3_settings(part_size="5mb", copy_part_threshold="5mb")) as parts:
        big = os.urandom(12 * MiB)
        await parts.write_bytes(base + "big.bin", big)
        copied = await parts.copy(base + "big.bin", base + "copy/big.bin")
        assert copied.size == len(big)
        assert copied.etag is not None
        assert copied.etag.endswith("-3")  # three parts
        assert await parts.read_bytes(base + "copy/big.bin") == big
    with pytest.raises(ObjectNotFound):
        await store.copy(base + "absent", base + "copy/absent")


async def test_a_multipart_upload_streams_tens_of_mib_in_flat_memory(
    store: S3Store, base: str
) -> None:
    total, chunk = 48 * MiB, MiB
    digest = hashlib.sha256()
    tracemalloc.start()
    try:
        async with store.open_write(base + "large.bin", size=total) as writer:
            for i in range(total // chunk):
                block = _block(i, chunk)
                digest.update(block)
                await writer.write(block)
        _, write_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        read_digest, read_size = hashlib.sha256(), 0
        async with store.open_read(base + "large.bin") as reader:
            async for part in reader.chunks(chunk):
                read_digest.update(part)
                read_size += len(part)
        _, read_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    info = writer.info
    assert info is not None
    assert info.size == total
    assert info.sha256 == digest.hexdigest()
    assert info.etag is not None
    assert info.etag.endswith("-10")  # 5 MiB parts: a real multipart
    assert (read_size, read_digest.hexdigest()) == (total, digest.hexdigest())
    # Two 5 MiB parts in flight plus one filling: about 15 MiB, whatever the object's size.
    assert write_peak < 20 * MiB, f"writing 48 MiB peaked at {write_peak / MiB:.1f} MiB"
    assert read_peak < 8 * MiB, f"reading 48 MiB peaked at {read_peak / MiB:.1f} MiB"


def _block(i: int, size: int) -> bytes:
    return hashlib.sha256(str(i).encode()).digest() * (size // 32)


async def test_a_failed_write_leaves_no_object_and_no_upload(store: S3Store, base: str) -> None:
    class Interrupted(Exception):
        pass

    async def write_then_fail() -> None:
        async with store.open_write(base + "half.bin") as writer:
            for i in range(3):
                await writer.write(_block(i, 4 * MiB))  # 12 MiB: the multipart upload began
            raise Interrupted

    with pytest.raises(Interrupted):
        await write_then_fail()
    assert await store.stat(base + "half.bin") is None
    bucket, key = base.removeprefix("s3://").split("/", 1)
    uploads = await store.client.list_multipart_uploads(Bucket=bucket, Prefix=key)
    assert uploads.get("Uploads", []) == []


async def test_a_write_of_another_size_than_announced_stores_nothing(
    store: S3Store, base: str
) -> None:
    with pytest.raises(StorageError, match="5 bytes written, 10 announced"):
        async with store.open_write(base + "short", size=10) as writer:
            await writer.write(b"12345")
    assert await store.stat(base + "short") is None


async def test_a_stream_copy_from_s3_to_another_store_and_back(store: S3Store, base: str) -> None:
    async with open_store(store.settings) as other:
        await store.write_bytes(base + "a.txt", b"hello", "text/plain")
        info = await stream_copy(store, base + "a.txt", other, base + "b.txt", chunk_size=2)
    assert (info.size, info.content_type) == (5, "text/plain")
    assert await store.read_bytes(base + "b.txt") == b"hello"


async def test_a_dropped_connection_mid_read_resumes_where_it_stopped(
    s3_server: S3Endpoint, s3_settings: SettingsFor, store: S3Store, base: str
) -> None:
    data = os.urandom(6 * MiB)
    await store.write_bytes(base + "flaky.bin", data)
    async with _DroppingProxy(s3_server.url, drop_after=2 * MiB) as proxy:
        async with open_store(s3_settings(endpoint_url=proxy.url)) as flaky:
            got = await flaky.read_bytes(base + "flaky.bin")
        assert proxy.dropped == 1
    assert got == data


async def test_an_unreachable_endpoint_is_a_clear_error(s3_settings: SettingsFor) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = s3_settings(
        endpoint_url=f"http://127.0.0.1:{port}", max_attempts=2, connect_timeout=1
    )
    began = time.monotonic()
    async with open_store(settings) as dead:
        with pytest.raises(StorageUnavailable) as caught:
            await dead.stat("s3://bucket/key")
    message = str(caught.value)
    assert message == f"s3://bucket/key: http://127.0.0.1:{port} is unreachable (could not connect)"
    assert settings.secret_access_key is not None
    assert settings.secret_access_key.get_secret_value() not in message
    assert time.monotonic() - began < 30


async def test_a_wrong_secret_is_refused_without_showing_it(
    s3_settings: SettingsFor, base: str
) -> None:
    async with open_store(s3_settings(secret_access_key="not-the-secret-at-all")) as wrong:
        with pytest.raises(
            StorageRefused, match=r"access denied by http://127\.0\.0\.1:\d+"
        ) as caught:
            await wrong.write_bytes(base + "x", b"1")
    assert "not-the-secret-at-all" not in str(caught.value)


async def test_a_bad_uri_is_refused_before_any_request(store: S3Store) -> None:
    with pytest.raises(StorageRefused, match="only s3:// URIs"):
        await store.stat("file:///etc/passwd")
    with pytest.raises(StorageRefused, match="not a valid S3 bucket name"):
        await store.stat("s3://Bad_Bucket/key")
    with pytest.raises(StorageRefused, match="names a prefix"):
        await store.write_bytes("s3://bucket/folder/", b"")


async def test_ambient_identity_from_the_standard_environment(
    s3_server: S3Endpoint, base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    async with open_store() as ambient:  # no settings: what `make s3-up` exports is enough
        await ambient.write_bytes(base + "ambient.txt", b"from the environment")
        assert await ambient.read_bytes(base + "ambient.txt") == b"from the environment"
        assert ambient.resolved.path_style
        assert ambient.resolved.region == s3_server.region


async def test_no_credentials_anywhere_is_refused_with_what_to_do(
    s3_server: S3Endpoint, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in list(os.environ):
        if name.startswith("AWS_") and name != "AWS_EC2_METADATA_DISABLED":
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", f"{tmp_path}/none")
    monkeypatch.setenv("AWS_CONFIG_FILE", f"{tmp_path}/none")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.url)
    async with open_store() as anonymous:
        with pytest.raises(StorageRefused, match="no S3 credentials: name a Connection of kind s3"):
            await anonymous.stat(f"s3://{s3_server.bucket}/k")


class _DroppingProxy:
    """A loopback TCP proxy that cuts the first response after ``drop_after`` bytes, once."""

    def __init__(self, upstream: str, drop_after: int) -> None:
        host, port = upstream.removeprefix("http://").split(":")
        self._upstream = (host, int(port))
        self._drop_after = drop_after
        self.dropped = 0
        self.url = ""

    async def __aenter__(self) -> _DroppingProxy:
        import asyncio

        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, client_reader: object, client_writer: object) -> None:
        import asyncio

        assert isinstance(client_reader, asyncio.StreamReader)
        assert isinstance(client_writer, asyncio.StreamWriter)
        up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        budget = self._drop_after if self.dropped == 0 else None

        async def pipe(
            src: asyncio.StreamReader, dst: asyncio.StreamWriter, limit: int | None
        ) -> None:
            sent = 0
            try:
                while data := await src.read(65536):
                    if limit is not None and sent + len(data) > limit:
                        self.dropped += 1
                        break
                    dst.write(data)
                    await dst.drain()
                    sent += len(data)
            except ConnectionError:
                pass
            finally:
                for w in (dst, client_writer, up_writer):
                    w.close()

        await asyncio.gather(
            pipe(client_reader, up_writer, None), pipe(up_reader, client_writer, budget)
        )


async def test_the_connection_check_asks_and_reports(
    s3_settings: SettingsFor, s3_server: S3Endpoint
) -> None:
    kind = S3ConnectionKind()
    good = await kind.check(s3_settings(bucket=s3_server.bucket))
    assert good.ok, good.message
    assert good.message == f"s3://{s3_server.bucket} answered"
    missing = await kind.check(s3_settings(bucket="no-such-bucket-here"))
    assert not missing.ok
    wrong = await kind.check(s3_settings(secret_access_key="wrong-secret-value"))
    assert not wrong.ok
    assert wrong.message is not None
    assert "access denied" in wrong.message
    assert "wrong-secret-value" not in wrong.message
