"""file:// storage: rooted, atomic.

A unit test of ``infrastructure.storage`` itself: it imports the module below the door on purpose.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dirigent.engine.infrastructure.storage import FileStorage, StorageRefused, Storages


async def test_writes_are_atomic_and_read_back(tmp_path: Path) -> None:
    storage = FileStorage(tmp_path)
    uri = f"{storage.root_uri}/runs/1/out.json"
    info = await storage.write_bytes(uri, b"{}", "application/json")
    assert await storage.read_bytes(uri) == b"{}"
    assert info.size == 2 and info.sha256 is not None
    assert not list((tmp_path / "runs" / "1").glob("*.part"))  # nothing staged is left behind


@pytest.mark.parametrize("uri", ["file:///etc/passwd", "s3://bucket/x", "file:///{root}/../escape"])
async def test_refuses_anything_outside_the_root(tmp_path: Path, uri: str) -> None:
    storage = FileStorage(tmp_path / "root")
    with pytest.raises(StorageRefused):
        await storage.read_bytes(uri.format(root=str(tmp_path / "root").lstrip("/")))


async def test_delete_removes_a_prefix(tmp_path: Path) -> None:
    storage = FileStorage(tmp_path)
    await storage.write_bytes(f"{storage.run_prefix(3)}/a/b", b"x")
    await storage.delete(storage.run_prefix(3))
    assert not (tmp_path / "runs" / "3").exists()


async def test_a_streamed_write_appears_only_on_a_clean_close(tmp_path: Path) -> None:
    storage = FileStorage(tmp_path)
    uri = f"{storage.root_uri}/big.bin"

    async def fail_halfway() -> None:
        async with storage.open_write(uri) as writer:
            await writer.write(b"half")
            assert not await storage.exists(uri)  # a reader never sees a half-written object
            raise RuntimeError("the producer failed")

    with pytest.raises(RuntimeError):
        await fail_halfway()
    assert not await storage.exists(uri)
    assert not list(tmp_path.glob(".*.part"))  # and nothing staged is left behind
    async with storage.open_write(uri, "application/octet-stream") as writer:
        for _ in range(3):
            await writer.write(b"abcd")
    assert writer.info is not None and writer.info.size == 12
    chunks = [c async for c in storage.open_read(uri, chunk_size=5)]
    assert chunks == [b"abcda", b"bcdab", b"cd"]


async def test_list_globs_within_a_segment_and_across_with_double_star(tmp_path: Path) -> None:
    storage = FileStorage(tmp_path)
    root = storage.root_uri
    for name in ("in/a.csv", "in/b.json", "in/2026/c.csv"):
        await storage.write_bytes(f"{root}/{name}", b"x")
    names = lambda found: [i.uri.removeprefix(root + "/") for i in found]  # noqa: E731
    assert names(await storage.list(f"{root}/in/*.csv")) == ["in/a.csv"]
    assert names(await storage.list(f"{root}/in/**.csv")) == ["in/2026/c.csv", "in/a.csv"]
    assert names(await storage.list(f"{root}/in")) == ["in/2026/c.csv", "in/a.csv", "in/b.json"]
    assert (await storage.stat(f"{root}/in/b.json")).content_type == "application/json"  # type: ignore[union-attr]
    assert await storage.stat(f"{root}/in/none") is None


async def test_the_registry_routes_by_scheme_and_names_what_it_serves(tmp_path: Path) -> None:
    storages = Storages.of(FileStorage(tmp_path))
    with pytest.raises(
        PermissionError, match=r"no storage backend serves 's3://' \(served: file://\)"
    ):
        await storages.stat("s3://bucket/key")
