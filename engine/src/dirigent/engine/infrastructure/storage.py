"""Storage for blocks: a scheme registry in front of backends, ``file://`` in core.

Every ``file://`` URI is resolved inside the artifact root and anything outside it is
refused, so a stored pipeline cannot turn a copy step into an arbitrary-file read. A write
becomes visible only once complete: bytes are staged beside the target (``.name.*.part``)
and renamed into place on a clean close; an exception removes the stage. Reads and writes
are streamed in chunks through a thread, so a 1 GB copy holds one chunk in memory and never
blocks the event loop.

``Storages`` is what a step sees as ``ctx.storage``: it picks the backend by the URI's
scheme, so a backend package adds a scheme without the blocks knowing.
"""

from __future__ import annotations

import asyncio
import builtins
import hashlib
import mimetypes
import os
import re
import shutil
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import IO
from urllib.parse import quote, unquote, urlparse

from dirigent.sdk import ArtifactInfo, ObjectWriter, Storage

DEFAULT_TYPE = "application/octet-stream"


class StorageRefused(PermissionError):
    """A URI this backend will not touch (wrong scheme, or outside the root)."""


def _guess_type(path: Path) -> str:
    return mimetypes.guess_type(path.name)[0] or DEFAULT_TYPE


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """``*``/``?`` within a segment, ``**`` across segments (fnmatch alone crosses ``/``)."""
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out + r"\Z")


class _FileWriter:
    """An ``ObjectWriter`` staging into a temporary file beside the target."""

    def __init__(self, handle: IO[bytes], content_type: str, uri: str) -> None:
        self._handle = handle
        self._digest = hashlib.sha256()
        self._size = 0
        self._uri = uri
        self._content_type = content_type
        self.info: ArtifactInfo | None = None

    async def write(self, data: bytes) -> None:
        self._digest.update(data)
        self._size += len(data)
        await asyncio.to_thread(self._handle.write, data)

    def finish(self) -> ArtifactInfo:
        self.info = ArtifactInfo(
            uri=self._uri,
            size=self._size,
            content_type=self._content_type,
            sha256=self._digest.hexdigest(),
        )
        return self.info


class FileStorage:
    """The ``file://`` backend, rooted at the artifact root."""

    scheme = "file"

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        # Every attempt's scope names it: pathlib's as_uri was 5 % of a busy worker's CPU.
        self.root_uri = self.root.as_uri()

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

    def uri(self, path: Path) -> str:
        return "file://" + quote(str(path))

    async def write_bytes(
        self, uri: str, data: bytes, content_type: str = DEFAULT_TYPE
    ) -> ArtifactInfo:
        async with self.open_write(uri, content_type) as writer:
            await writer.write(data)
        assert writer.info is not None
        return writer.info

    async def read_bytes(self, uri: str) -> bytes:
        return await asyncio.to_thread(self.path(uri).read_bytes)

    async def exists(self, uri: str) -> bool:
        return await asyncio.to_thread(self.path(uri).is_file)

    async def delete(self, uri: str) -> None:
        path = self.path(uri)
        if path.is_dir():
            await asyncio.to_thread(shutil.rmtree, path, True)
        else:
            path.unlink(missing_ok=True)

    async def stat(self, uri: str) -> ArtifactInfo | None:
        path = self.path(uri)
        try:
            st = await asyncio.to_thread(path.stat)
        except FileNotFoundError:
            return None
        if not path.is_file():
            return None
        return ArtifactInfo(uri=uri, size=st.st_size, content_type=_guess_type(path))

    async def list(self, pattern: str) -> builtins.list[ArtifactInfo]:
        return await asyncio.to_thread(self._list, pattern)

    def _list(self, pattern: str) -> builtins.list[ArtifactInfo]:
        path_pattern = unquote(urlparse(pattern).path)
        wild = re.search(r"[*?\[]", path_pattern)
        base_text = path_pattern[: wild.start()] if wild else path_pattern
        base = self.path("file://" + quote(base_text.rsplit("/", 1)[0] if wild else base_text))
        matcher = _glob_regex(path_pattern) if wild else None
        out: list[ArtifactInfo] = []
        if base.is_file():
            candidates = [base]
        elif base.is_dir():
            candidates = [p for p in base.rglob("*") if p.is_file()]
        else:
            candidates = []
        for p in candidates:
            if p.name.startswith(".") and p.name.endswith(".part"):
                continue  # a write in progress is not an object yet
            if matcher is not None and not matcher.match(str(p)):
                continue
            out.append(
                ArtifactInfo(uri=self.uri(p), size=p.stat().st_size, content_type=_guess_type(p))
            )
        return sorted(out, key=lambda a: a.uri)

    async def open_read(self, uri: str, *, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
        path = self.path(uri)
        handle = await asyncio.to_thread(path.open, "rb")
        try:
            while chunk := await asyncio.to_thread(handle.read, chunk_size):
                yield chunk
        finally:
            handle.close()

    def open_write(
        self, uri: str, content_type: str = DEFAULT_TYPE
    ) -> AbstractAsyncContextManager[ObjectWriter]:
        return self._open_write(uri, content_type)

    @asynccontextmanager
    async def _open_write(self, uri: str, content_type: str) -> AsyncIterator[ObjectWriter]:
        path = self.path(uri)
        fd, tmp = await asyncio.to_thread(self._stage, path)
        handle = os.fdopen(fd, "wb")
        writer = _FileWriter(handle, content_type, uri)
        try:
            yield writer
            await asyncio.to_thread(self._commit, handle, tmp, path)
            writer.finish()
        except BaseException:
            self._discard(handle, tmp)
            raise

    @staticmethod
    def _stage(path: Path) -> tuple[int, str]:
        path.parent.mkdir(parents=True, exist_ok=True)
        return tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")

    @staticmethod
    def _discard(handle: IO[bytes], tmp: str) -> None:
        handle.close()
        Path(tmp).unlink(missing_ok=True)

    @staticmethod
    def _commit(handle: IO[bytes], tmp: str, path: Path) -> None:
        handle.flush()
        os.fsync(handle.fileno())
        handle.close()
        os.replace(tmp, path)


# What ``ctx.storage`` serves on every worker (``Storages.of``); ``requires.storage`` is
# checked against it at apply.
SERVED_SCHEMES: frozenset[str] = frozenset({"file"})


class Storages:
    """``ctx.storage``: routes each URI to the backend registered for its scheme."""

    def __init__(self, backends: Mapping[str, Storage]) -> None:
        self._backends = dict(backends)

    @classmethod
    def of(cls, files: FileStorage, **more: Storage) -> Storages:
        return cls({"file": files, **more})

    def _backend(self, uri: str) -> Storage:
        scheme = urlparse(uri).scheme
        backend = self._backends.get(scheme)
        if backend is None:
            known = ", ".join(f"{s}://" for s in sorted(self._backends))
            raise StorageRefused(
                f"{uri}: no storage backend serves '{scheme}://' (served: {known})"
            )
        return backend

    async def read_bytes(self, uri: str) -> bytes:
        return await self._backend(uri).read_bytes(uri)

    async def write_bytes(
        self, uri: str, data: bytes, content_type: str = DEFAULT_TYPE
    ) -> ArtifactInfo:
        return await self._backend(uri).write_bytes(uri, data, content_type)

    async def exists(self, uri: str) -> bool:
        return await self._backend(uri).exists(uri)

    async def delete(self, uri: str) -> None:
        await self._backend(uri).delete(uri)

    async def stat(self, uri: str) -> ArtifactInfo | None:
        return await self._backend(uri).stat(uri)

    async def list(self, pattern: str) -> builtins.list[ArtifactInfo]:
        return await self._backend(pattern).list(pattern)

    def open_read(self, uri: str, *, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
        return self._backend(uri).open_read(uri, chunk_size=chunk_size)

    def open_write(
        self, uri: str, content_type: str = DEFAULT_TYPE
    ) -> AbstractAsyncContextManager[ObjectWriter]:
        return self._backend(uri).open_write(uri, content_type)


__all__ = ["FileStorage", "StorageRefused", "Storages"]
