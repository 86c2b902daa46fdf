"""The ``file://`` storage backend, rooted at the artifact root.

Every URI is resolved inside the root and anything outside it is refused, so a stored
pipeline cannot turn a copy step into an arbitrary-file read. A write becomes visible only
once complete: bytes are staged beside the target and renamed into place.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlparse

from dirigent.sdk import ArtifactInfo


class StorageRefused(ValueError):
    """A URI this backend will not touch (wrong scheme, or outside the root)."""


class FileStorage:
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    @property
    def root_uri(self) -> str:
        return self.root.as_uri()

    def run_prefix(self, run_id: int) -> str:
        return f"{self.root_uri}/runs/{run_id}"

    def path(self, uri: str) -> Path:
        parsed = urlparse(uri)
        if parsed.scheme != "file":
            raise StorageRefused(f"{uri}: only file:// URIs are served here")
        path = Path(unquote(parsed.path)).resolve()
        if path != self.root and self.root not in path.parents:
            raise StorageRefused(f"{uri} is outside the artifact root {self.root_uri}")
        return path

    def _write(self, path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    async def write_bytes(
        self, uri: str, data: bytes, content_type: str = "application/octet-stream"
    ) -> ArtifactInfo:
        path = self.path(uri)
        await asyncio.to_thread(self._write, path, data)
        return ArtifactInfo(
            uri=uri,
            size=len(data),
            content_type=content_type,
            sha256=hashlib.sha256(data).hexdigest(),
        )

    async def read_bytes(self, uri: str) -> bytes:
        return await asyncio.to_thread(self.path(uri).read_bytes)

    async def exists(self, uri: str) -> bool:
        return self.path(uri).exists()

    async def delete(self, uri: str) -> None:
        path = self.path(uri)
        if path.is_dir():
            await asyncio.to_thread(shutil.rmtree, path, True)
        else:
            path.unlink(missing_ok=True)
