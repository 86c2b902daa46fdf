"""file:// storage: rooted, atomic."""

from __future__ import annotations

from pathlib import Path

import pytest

from dirigent.engine.storage import FileStorage, StorageRefused


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
