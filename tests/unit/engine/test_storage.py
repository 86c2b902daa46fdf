"""file:// storage: rooted, atomic, ranged, listed in sorted pages, copied on the disk.

A unit test of ``infrastructure.storage`` itself: it imports the module below the door on purpose.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dirigent.engine.infrastructure.storage import FileStorage
from dirigent.sdk import (
    ArtifactInfo,
    InvalidRange,
    ObjectNotFound,
    ObjectStore,
    StorageError,
    StorageRefused,
)


async def _pages(storage: FileStorage, prefix: str, **kw: object) -> list[list[str]]:
    return [[i.uri for i in page] async for page in storage.list(prefix, **kw)]  # type: ignore[arg-type]


def test_it_is_the_sdk_object_store() -> None:
    assert issubclass(FileStorage, ObjectStore)


async def test_writes_are_atomic_and_read_back(tmp_path: Path) -> None:
    storage = FileStorage(tmp_path)
    uri = f"{storage.root_uri}/runs/1/out.json"
    info = await storage.write_bytes(uri, b"{}", "application/json")
    assert await storage.read_bytes(uri) == b"{}"
    assert info.size == 2 and info.sha256 is not None and info.content_type == "application/json"
    assert not list((tmp_path / "runs" / "1").glob("*.part"))  # nothing staged is left behind


@pytest.mark.parametrize(
    "uri", ["file:///etc/passwd", "s3://bucket/x", "file:///{root}/../escape", "file://host/x"]
)
async def test_refuses_anything_outside_the_root(tmp_path: Path, uri: str) -> None:
    storage = FileStorage(tmp_path / "root")
    with pytest.raises(StorageRefused):
        await storage.read_bytes(uri.format(root=str(tmp_path / "root").lstrip("/")))


async def test_a_ranged_read_opens_before_it_yields(tmp_path: Path) -> None:
    storage = FileStorage(tmp_path)
    uri = f"{storage.root_uri}/data.bin"
    await storage.write_bytes(uri, bytes(range(10)))
    async with storage.open_read(uri, offset=3, length=4) as reader:
        assert (reader.offset, reader.length, reader.info.size) == (3, 4, 10)
        assert b"".join([c async for c in reader.chunks(3)]) == bytes([3, 4, 5, 6])
    async with storage.open_read(uri, offset=8, length=100) as reader:  # clipped to the end
        assert [c async for c in reader.chunks()] == [bytes([8, 9])]
    async with storage.open_read(uri, offset=10) as reader:  # at the end: an empty read
        assert reader.length == 0 and [c async for c in reader.chunks()] == []
    with pytest.raises(InvalidRange):
        async with storage.open_read(uri, offset=11):
            pass
    with pytest.raises(ObjectNotFound):
        async with storage.open_read(f"{storage.root_uri}/missing.bin"):
            pass


async def test_a_write_of_another_size_than_announced_leaves_nothing(tmp_path: Path) -> None:
    storage = FileStorage(tmp_path)
    uri = f"{storage.root_uri}/sized.bin"
    with pytest.raises(StorageError, match="3 bytes written, 4 announced"):
        async with storage.open_write(uri, size=4) as writer:
            await writer.write(b"abc")
    with pytest.raises(StorageError, match="more than the announced 2"):
        async with storage.open_write(uri, size=2) as writer:
            await writer.write(b"abc")
    assert await storage.stat(uri) is None
    assert not list(tmp_path.glob(".*.part"))


async def test_a_streamed_write_appears_only_on_a_clean_close(tmp_path: Path) -> None:
    storage = FileStorage(tmp_path)
    uri = f"{storage.root_uri}/big.bin"

    async def fail_halfway() -> None:
        async with storage.open_write(uri) as writer:
            await writer.write(b"half")
            assert not await storage.exists(uri)  # a reader never sees a half-written object
            assert await _pages(storage, storage.root_uri + "/") == []  # nor a listing
            raise RuntimeError("the producer failed")

    with pytest.raises(RuntimeError):
        await fail_halfway()
    assert not await storage.exists(uri)
    assert not list(tmp_path.glob(".*.part"))  # and nothing staged is left behind
    async with storage.open_write(uri, content_type="application/x-thing", size=12) as writer:
        for _ in range(3):
            await writer.write(b"abcd")
    assert writer.info is not None and writer.info.size == 12
    async with storage.open_read(uri) as reader:
        assert [c async for c in reader.chunks(5)] == [b"abcda", b"bcdab", b"cd"]


async def test_list_is_a_plain_prefix_in_sorted_pages_that_resume_after_a_uri(
    tmp_path: Path,
) -> None:
    storage = FileStorage(tmp_path)
    root = storage.root_uri
    for name in ("in/b.csv", "in/a.csv", "in/2026/c.csv", "inbox/d.csv", "other/e.csv"):
        await storage.write_bytes(f"{root}/{name}", b"x")
    assert await _pages(storage, f"{root}/in", page_size=2) == [
        [f"{root}/in/2026/c.csv", f"{root}/in/a.csv"],
        [f"{root}/in/b.csv", f"{root}/inbox/d.csv"],
    ]
    assert await _pages(storage, f"{root}/in/") == [
        [f"{root}/in/2026/c.csv", f"{root}/in/a.csv", f"{root}/in/b.csv"]
    ]
    assert await _pages(storage, f"{root}/in/", start_after=f"{root}/in/a.csv") == [
        [f"{root}/in/b.csv"]
    ]
    assert await _pages(storage, f"{root}/nothing/") == []


async def test_paths_compare_decoded_whichever_way_a_uri_is_written(tmp_path: Path) -> None:
    storage = FileStorage(tmp_path)
    info = await storage.write_bytes(f"{storage.root_uri}/a b/c d.txt", b"x")
    assert info.uri == f"{storage.root_uri}/a%20b/c%20d.txt"  # what the store hands back is quoted
    assert await storage.read_bytes(info.uri) == b"x"
    assert await _pages(storage, f"{storage.root_uri}/a b/") == [[info.uri]]
    assert await _pages(storage, f"{storage.root_uri}/a%20b/c") == [[info.uri]]
    assert await _pages(storage, f"{storage.root_uri}/a b/", start_after=info.uri) == []


async def test_a_prefix_never_lists_beside_the_root(tmp_path: Path) -> None:
    storage = FileStorage(tmp_path / "root")
    (tmp_path / "rootx").mkdir()
    (tmp_path / "rootx" / "secret").write_bytes(b"no")
    await storage.write_bytes(f"{storage.root_uri}/mine", b"x")
    assert await _pages(storage, storage.root_uri) == [[f"{storage.root_uri}/mine"]]


async def test_delete_removes_the_object_and_the_folders_it_empties(tmp_path: Path) -> None:
    storage = FileStorage(tmp_path)
    await storage.write_bytes(f"{storage.root_uri}/runs/3/a/b", b"x")
    await storage.write_bytes(f"{storage.root_uri}/runs/4/c", b"x")
    await storage.delete(f"{storage.root_uri}/runs/3/a/b")
    await storage.delete(f"{storage.root_uri}/runs/3/a/b")  # a missing object is not an error
    assert not (tmp_path / "runs" / "3").exists()
    assert (tmp_path / "runs" / "4" / "c").exists() and tmp_path.exists()
    await storage.delete(f"{storage.root_uri}/runs/4")  # a folder is not an object
    assert (tmp_path / "runs" / "4" / "c").exists()


async def test_copy_stays_on_the_disk_and_is_all_or_nothing(tmp_path: Path) -> None:
    storage = FileStorage(tmp_path)
    source = f"{storage.root_uri}/in/a.json"
    written = await storage.write_bytes(source, b'{"a": 1}', "application/json")
    copied = await storage.copy(source, f"{storage.root_uri}/out/b.json")
    assert isinstance(copied, ArtifactInfo)
    assert (copied.size, copied.sha256) == (written.size, written.sha256)
    assert (tmp_path / "out" / "b.json").read_bytes() == b'{"a": 1}'
    with pytest.raises(ObjectNotFound):
        await storage.copy(f"{storage.root_uri}/in/none", f"{storage.root_uri}/out/none")
    assert not (tmp_path / "out" / "none").exists()
    assert not list((tmp_path / "out").glob(".*.part"))


async def test_stat_reports_a_file_and_an_etag_that_changes_with_it(tmp_path: Path) -> None:
    storage = FileStorage(tmp_path)
    uri = f"{storage.root_uri}/in/b.json"
    await storage.write_bytes(uri, b"{}")
    first = await storage.stat(uri)
    assert first is not None and first.content_type == "application/json" and first.size == 2
    await storage.write_bytes(uri, b"{}")
    second = await storage.stat(uri)
    assert second is not None and second.etag != first.etag
    assert await storage.stat(f"{storage.root_uri}/in") is None  # a folder is not an object
    assert await storage.stat(f"{storage.root_uri}/in/b.json/x") is None
