"""The ``file://`` store: the engine's own scheme, an ``ObjectStore`` rooted at a folder.

Every ``file://`` URI is resolved inside the root and anything outside it is refused, so a
stored pipeline cannot turn a copy step into an arbitrary-file read. A write becomes visible
only once complete: bytes are staged beside the target (``.name.*.part``) and renamed into
place on a clean close; an exception removes the stage, and a stage is never listed. Reads
and writes go through a thread one chunk at a time, so a 1 GB copy holds one chunk in memory
and never blocks the event loop; a copy inside the root stays on the disk (copied into a
stage, then renamed).

URIs and paths: a URI's path is percent-decoded (``file:///a%20b`` is the file ``/a b``), and
what this store returns is quoted (``FileStorage.uri``). Listing compares and sorts the
decoded paths, so a prefix or a ``start_after`` written either way means the same thing.
Deleting an object also removes the folders it leaves empty, up to the root: a run's scratch
prefix disappears with its last object.
"""

from __future__ import annotations

import asyncio
import hashlib
import mimetypes
import os
import tempfile
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.parse import quote, unquote, urlparse

from dirigent.sdk import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_CONTENT_TYPE,
    ArtifactInfo,
    InvalidRange,
    ObjectNotFound,
    ObjectReader,
    ObjectStore,
    ObjectWriter,
    StorageError,
    StorageRefused,
)

__all__ = ["FileStorage"]

_STAGE_SUFFIX = ".part"


def _guess_type(path: Path) -> str:
    return mimetypes.guess_type(path.name)[0] or DEFAULT_CONTENT_TYPE


def _is_stage(name: str) -> bool:
    return name.startswith(".") and name.endswith(_STAGE_SUFFIX)


class _FileWriter:
    """An ``ObjectWriter`` staging into a temporary file beside the target.

    Small writes gather in a buffer of one chunk before they go to the disk thread: a
    network stream hands over tens of KiB at a time, and a thread hop for each cost a
    download most of its speed.
    """

    def __init__(self, handle: IO[bytes], uri: str, content_type: str, size: int | None) -> None:
        self._handle = handle
        self._digest = hashlib.sha256()
        self._written = 0
        self._pending = bytearray()
        self._uri = uri
        self._content_type = content_type
        self._size = size
        self.info: ArtifactInfo | None = None

    async def write(self, data: bytes) -> None:
        if self._size is not None and self._written + len(data) > self._size:
            raise StorageError(f"{self._uri}: more than the announced {self._size} bytes written")
        self._digest.update(data)
        self._written += len(data)
        self._pending += data
        if len(self._pending) >= DEFAULT_CHUNK_SIZE:
            await self.flush()

    async def flush(self) -> None:
        if self._pending:
            pending, self._pending = bytes(self._pending), bytearray()
            await asyncio.to_thread(self._handle.write, pending)

    def check_complete(self) -> None:
        if self._size is not None and self._written != self._size:
            raise StorageError(
                f"{self._uri}: {self._written} bytes written, {self._size} announced"
            )

    def finish(self) -> ArtifactInfo:
        self.info = ArtifactInfo(
            uri=self._uri,
            size=self._written,
            content_type=self._content_type,
            sha256=self._digest.hexdigest(),
        )
        return self.info


@dataclass
class _FileReader:
    """An ``ObjectReader`` over an open file: ``length`` bytes from ``offset``."""

    handle: IO[bytes]
    info: ArtifactInfo
    offset: int
    length: int

    async def chunks(self, size: int = DEFAULT_CHUNK_SIZE) -> AsyncIterator[bytes]:
        left = self.length
        await asyncio.to_thread(self.handle.seek, self.offset)
        while left > 0:
            chunk = await asyncio.to_thread(self.handle.read, min(max(size, 1), left))
            if not chunk:  # the file shrank under us: what is there is all there is
                return
            left -= len(chunk)
            yield chunk


class FileStorage(ObjectStore):
    """``file://`` URIs inside ``root``."""

    scheme = "file"

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        # Every attempt's scope names it: pathlib's as_uri was 5 % of a busy worker's CPU.
        self.root_uri = self.root.as_uri()

    def path(self, uri: str) -> Path:
        """The file ``uri`` names, resolved; ``StorageRefused`` outside the root."""
        parsed = urlparse(uri)
        if parsed.scheme != "file":
            raise StorageRefused(f"{uri}: only file:// URIs are served here")
        if parsed.netloc not in ("", "localhost"):
            raise StorageRefused(f"{uri}: names host {parsed.netloc!r}; file:// URIs are local")
        path = Path(unquote(parsed.path)).resolve()
        if path != self.root and self.root not in path.parents:
            raise StorageRefused(f"{uri} is outside the artifact root {self.root_uri}")
        return path

    def uri(self, path: Path) -> str:
        return "file://" + quote(str(path))

    # --- the five operations -----------------------------------------------------------

    async def stat(self, uri: str) -> ArtifactInfo | None:
        path = self.path(uri)
        try:
            st = await asyncio.to_thread(path.stat)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if not path.is_file():
            return None
        return self._info(path, st)

    def _info(self, path: Path, st: os.stat_result) -> ArtifactInfo:
        return ArtifactInfo(
            uri=self.uri(path),
            size=st.st_size,
            content_type=_guess_type(path),
            # Changes with every replace: a rename gives the name a new inode and mtime.
            etag=f"{st.st_ino:x}-{st.st_mtime_ns:x}-{st.st_size:x}",
        )

    def open_read(
        self, uri: str, *, offset: int = 0, length: int | None = None
    ) -> AbstractAsyncContextManager[ObjectReader]:
        return self._open_read(uri, offset, length)

    @asynccontextmanager
    async def _open_read(
        self, uri: str, offset: int, length: int | None
    ) -> AsyncIterator[ObjectReader]:
        path = self.path(uri)
        try:
            handle = await asyncio.to_thread(path.open, "rb")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise ObjectNotFound(f"{uri} does not exist") from None
        try:
            info = self._info(path, os.fstat(handle.fileno()))
            if offset < 0 or offset > info.size:
                raise InvalidRange(f"{uri}: offset {offset} is past its end ({info.size} bytes)")
            left = info.size - offset
            span = left if length is None else max(0, min(length, left))
            yield _FileReader(handle, info, offset, span)
        finally:
            handle.close()

    def open_write(
        self, uri: str, *, content_type: str = DEFAULT_CONTENT_TYPE, size: int | None = None
    ) -> AbstractAsyncContextManager[ObjectWriter]:
        return self._open_write(uri, content_type, size)

    @asynccontextmanager
    async def _open_write(
        self, uri: str, content_type: str, size: int | None
    ) -> AsyncIterator[ObjectWriter]:
        path = self.path(uri)
        fd, tmp = await asyncio.to_thread(_stage, path)
        handle = os.fdopen(fd, "wb")
        writer = _FileWriter(handle, self.uri(path), content_type, size)
        try:
            yield writer
            writer.check_complete()
            await writer.flush()
            await asyncio.to_thread(_commit, handle, tmp, path)
            writer.finish()
        except BaseException:
            _discard(handle, tmp)
            raise

    async def list(
        self, prefix: str, *, start_after: str | None = None, page_size: int = 1000
    ) -> AsyncIterator[Sequence[ArtifactInfo]]:
        wanted = self._prefix_path(prefix)
        after = unquote(urlparse(start_after).path) if start_after is not None else None
        found = await asyncio.to_thread(_files_under, wanted, after, self.root)
        size = max(1, page_size)
        for start in range(0, len(found), size):
            page = []
            for path in found[start : start + size]:
                try:
                    page.append(self._info(path, path.stat()))
                except FileNotFoundError:  # deleted since the walk
                    continue
            if page:
                yield page

    def _prefix_path(self, prefix: str) -> str:
        """The decoded, resolved path text a listed file's path must start with."""
        raw = unquote(urlparse(prefix).path)
        resolved = str(self.path(prefix))
        # resolve() drops a trailing slash, which means "inside this folder" in a prefix.
        return resolved + "/" if raw.endswith("/") and resolved != "/" else resolved

    async def delete(self, uri: str) -> None:
        path = self.path(uri)
        await asyncio.to_thread(self._remove, path)

    def _remove(self, path: Path) -> None:
        if path == self.root or path.is_dir():
            return  # a folder is not an object (retention lists a prefix and deletes each)
        path.unlink(missing_ok=True)
        _prune_empty(path.parent, self.root)

    # --- on the disk, not through the worker ---------------------------------------------

    async def copy(self, source: str, target: str) -> ArtifactInfo:
        """A copy inside the root: into a stage beside the target, then renamed into place."""
        src, dst = self.path(source), self.path(target)
        if not await asyncio.to_thread(src.is_file):
            raise ObjectNotFound(f"{source} does not exist")
        digest = await asyncio.to_thread(_copy_staged, src, dst)
        st = await asyncio.to_thread(dst.stat)
        return self._info(dst, st).model_copy(update={"sha256": digest})


def _stage(path: Path) -> tuple[int, str]:
    # A concurrent delete may remove an empty parent between mkdir and mkstemp: try again.
    for tries_left in (2, 1, 0):
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            return tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=_STAGE_SUFFIX)
        except FileNotFoundError:
            if not tries_left:
                raise
    raise AssertionError("unreachable")


def _discard(handle: IO[bytes], tmp: str) -> None:
    handle.close()
    Path(tmp).unlink(missing_ok=True)


def _commit(handle: IO[bytes], tmp: str, path: Path) -> None:
    handle.flush()
    os.fsync(handle.fileno())
    handle.close()
    os.replace(tmp, path)


def _copy_staged(src: Path, dst: Path) -> str:
    """Copy ``src`` to ``dst`` all or nothing; the content's SHA-256."""
    fd, tmp = _stage(dst)
    digest = hashlib.sha256()
    with os.fdopen(fd, "wb") as out:
        try:
            with src.open("rb") as source:
                while chunk := source.read(DEFAULT_CHUNK_SIZE):
                    digest.update(chunk)
                    out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    os.replace(tmp, dst)
    return digest.hexdigest()


def _files_under(prefix: str, after: str | None, root: Path) -> list[Path]:
    """Files under ``root`` whose decoded path starts with ``prefix`` and sorts after
    ``after``, sorted. The walk starts at the deepest folder the prefix names, never above
    ``root`` (the prefix ``file:///data`` would otherwise walk ``/`` for ``/data...``)."""
    base = Path(prefix if prefix.endswith("/") else os.path.dirname(prefix) or "/")
    if base != root and root not in base.parents:
        base = root
    if not base.is_dir():
        return []
    found = [
        path
        for path in _walk(base)
        if str(path).startswith(prefix) and (after is None or str(path) > after)
    ]
    return sorted(found, key=str)


def _walk(base: Path) -> Iterator[Path]:
    for folder, _, names in os.walk(base):
        for name in names:
            if not _is_stage(name):  # a write in progress is not an object yet
                yield Path(folder) / name


def _prune_empty(folder: Path, root: Path) -> None:
    """Remove ``folder`` and its parents while they are empty, never ``root`` itself."""
    while folder != root and root in folder.parents:
        try:
            folder.rmdir()
        except OSError:  # not empty (or already gone): stop here
            return
        folder = folder.parent
