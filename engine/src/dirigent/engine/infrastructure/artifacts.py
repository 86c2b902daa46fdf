"""The artifact store: one process's storage — its artifact root, its opened stores, ``ctx.storage``.

Why one object per process: a store holds a client with pooled connections (for S3, an
HTTP session), so the process keeps one per scheme and set of settings and closes them when
it stops (``aclose``: the worker at shutdown, the engine when it closes). Stores are opened
lazily, on the first URI that needs them, through ``StorageBackend.open`` (which promises not
to reach the network): a process that never touches ``s3://`` never builds an S3 client.

Routing a URI: ``file://`` goes to the ``FileStorage`` rooted at the artifact root when that
root is a folder (and is refused when the root is elsewhere: a pod's own disk is no place
for what another pod reads); any other scheme goes to its backend's store, opened with

1. the artifact root's Connection (``DIRIGENT_ARTIFACT_CONNECTION``) for a URI under the
   root, or the ambient identity when none is set — re-read at most every
   ``connection_ttl`` seconds, and a changed Connection opens a new store;
2. otherwise the step's ``connection`` (read in the run's namespace), checked against the
   backend's settings model;
3. otherwise the process's ambient identity (``backend.open(None)``).

Tenancy: the root holds one folder per namespace, ``<root>/namespaces/<namespace>``, and a
step's ``ctx.storage`` (``StepStorage``) is scoped to its run's namespace. Every URI it is
handed is checked before a store is asked: one under the artifact root must lie inside the
namespace's part, a listing prefix that reaches into the root must start inside it, and a
URI on the root's own bucket or host may not carry ``.``/``..``/empty path segments (an
S3-compatible server may normalise them into another namespace's keys). The engine's own
reads and writes (outputs, the API's artifact content, retention) use ``ArtifactStore``
directly: rows already name their run, and so their namespace.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlparse

from pydantic import BaseModel, ValidationError

from dirigent.engine.infrastructure.plugins import Catalog, SchemeEntry
from dirigent.engine.infrastructure.settings import EngineSettings
from dirigent.engine.infrastructure.storage import FileStorage
from dirigent.sdk import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_CONTENT_TYPE,
    ArtifactInfo,
    InvalidRange,
    ObjectReader,
    ObjectStore,
    ObjectWriter,
    StorageBackend,
    StorageRefused,
    glob_prefix,
    stream_copy,
)

__all__ = [
    "ArtifactRoot",
    "ArtifactStore",
    "ConnectionReader",
    "NamedSettings",
    "StepStorage",
]

ConnectionReader = Callable[[str, str, tuple[str, ...]], Awaitable[dict[str, Any] | None]]
"""``(namespace, name, kinds)`` → a Connection's settings with secrets opened, None when
there is none; a ValueError when it is of another kind or cannot be opened."""

NAMESPACES = "namespaces"


@dataclass(frozen=True)
class NamedSettings:
    """A Connection's opened settings and the name to say in messages (never its values)."""

    name: str
    values: Mapping[str, Any]


@dataclass(frozen=True)
class ArtifactRoot:
    """Where artifacts live: ``uri`` has no trailing slash; ``folder`` is set for file://."""

    uri: str
    scheme: str
    folder: Path | None

    @classmethod
    def parse(cls, text: str) -> ArtifactRoot:
        """A folder (``/data``, ``file:///data``) or a URI (``s3://bucket/prefix``)."""
        scheme, sep, _ = text.partition("://")
        if not sep or scheme == "file":
            folder = Path(unquote(urlparse(text).path) if sep else text).resolve()
            return cls(folder.as_uri(), "file", folder)
        uri = text.rstrip("/")
        if _odd_segments(uri):
            raise StorageRefused(f"the artifact root {text} has an empty, '.' or '..' segment")
        return cls(uri, scheme, None)

    def namespace_root(self, namespace: str) -> str:
        return f"{self.uri}/{NAMESPACES}/{namespace}"

    def run_prefix(self, namespace: str, run_id: int) -> str:
        return f"{self.namespace_root(namespace)}/runs/{run_id}"

    def holds(self, uri: str) -> bool:
        """Whether ``uri`` (not of file://) lies under the root."""
        return self.folder is None and uri.startswith(self.uri + "/")


class ArtifactStore:
    """The process's stores, opened lazily and closed together; see the module docstring."""

    def __init__(
        self,
        root: ArtifactRoot,
        schemes: Mapping[str, SchemeEntry],
        *,
        connection: str | None = None,
        read_connection: ConnectionReader | None = None,
        connection_ttl: float = 60.0,
    ) -> None:
        self.root = root
        self.files = FileStorage(root.folder) if root.folder is not None else None
        self._backends = {scheme: entry.backend for scheme, entry in schemes.items()}
        self._connection = connection
        self._read_connection = read_connection
        self._ttl = connection_ttl
        self._root_settings: tuple[float, NamedSettings | None] | None = None
        self._stores: dict[tuple[str, str | None], ObjectStore] = {}
        self._stack = AsyncExitStack()
        self._opening = asyncio.Lock()
        if root.folder is None and root.scheme not in self._backends:
            raise StorageRefused(
                f"the artifact root {root.uri} needs a storage backend for {root.scheme}:// "
                f"and none is installed (served: {self._served()})"
            )

    @classmethod
    def from_settings(
        cls,
        settings: EngineSettings,
        catalog: Catalog,
        read_connection: ConnectionReader | None = None,
    ) -> ArtifactStore:
        """The store a process builds: its root and connection from ``settings``, the
        schemes its catalog installed."""
        return cls(
            ArtifactRoot.parse(settings.artifact_root),
            catalog.storage_backends,
            connection=settings.artifact_connection,
            read_connection=read_connection,
        )

    @property
    def root_uri(self) -> str:
        return self.root.uri

    def namespace_root(self, namespace: str) -> str:
        """What ``${artifacts}`` is for a run of ``namespace``: its part of the root."""
        return self.root.namespace_root(namespace)

    def run_prefix(self, namespace: str, run_id: int) -> str:
        """A run's scratch (``${run.scratch}``): its outputs and captures go under it."""
        return self.root.run_prefix(namespace, run_id)

    def for_step(self, namespace: str, connection: NamedSettings | None = None) -> StepStorage:
        """``ctx.storage`` for a step of ``namespace`` that named ``connection``, if any."""
        return StepStorage(self, namespace, connection)

    async def aclose(self) -> None:
        """Close every opened store; later use opens them again."""
        stack, self._stack = self._stack, AsyncExitStack()
        self._stores.clear()
        await stack.aclose()

    # --- routing ---------------------------------------------------------------------

    async def store_for(self, uri: str, connection: NamedSettings | None = None) -> ObjectStore:
        """The store serving ``uri``, opened with the settings its place calls for."""
        scheme = scheme_of(uri)
        if scheme == "file":
            if self.files is None:
                raise StorageRefused(
                    f"{uri}: file:// is served only when the artifact root is a folder; "
                    f"this installation keeps artifacts at {self.root.uri}"
                )
            return self.files
        backend = self._backends.get(scheme)
        if backend is None:
            raise StorageRefused(
                f"{uri}: no storage backend serves '{scheme}://' (served: {self._served()})"
            )
        if self.root.holds(uri):
            connection = await self._root_connection(backend)
        return await self._open(scheme, backend, connection)

    def _served(self) -> str:
        return ", ".join(f"{s}://" for s in sorted({"file", *self._backends}))

    async def _root_connection(self, backend: StorageBackend[Any]) -> NamedSettings | None:
        if self._connection is None:
            return None
        cached = self._root_settings
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        if self._read_connection is None:
            raise StorageRefused(
                f"the artifact root's connection {self._connection} cannot be read here"
            )
        namespace, name = self._connection.split("/", 1)
        kind = type(backend).connection_kind
        try:
            values = await self._read_connection(namespace, name, (kind,) if kind else ())
        except ValueError as err:
            raise StorageRefused(
                f"the artifact root's connection {self._connection} cannot be opened: {err}"
            ) from None
        if values is None:
            raise StorageRefused(
                f"the artifact root's connection {self._connection} does not exist "
                "(DIRIGENT_ARTIFACT_CONNECTION)"
            )
        found = NamedSettings(self._connection, values)
        self._root_settings = (time.monotonic() + self._ttl, found)
        return found

    async def _open(
        self, scheme: str, backend: StorageBackend[Any], connection: NamedSettings | None
    ) -> ObjectStore:
        key = (scheme, _fingerprint(connection))
        store = self._stores.get(key)
        if store is not None:
            return store
        config = _config(scheme, backend, connection)
        async with self._opening:
            store = self._stores.get(key)
            if store is None:
                store = await self._stack.enter_async_context(backend.open(config))
                self._stores[key] = store
        return store

    # --- the engine's own use (outputs, the API's content route, retention) ----------

    async def write_bytes(
        self, uri: str, data: bytes, content_type: str = DEFAULT_CONTENT_TYPE
    ) -> ArtifactInfo:
        return await (await self.store_for(uri)).write_bytes(uri, data, content_type)

    async def read_bytes(self, uri: str) -> bytes:
        return await (await self.store_for(uri)).read_bytes(uri)

    def open_read(
        self, uri: str, *, offset: int = 0, length: int | None = None
    ) -> AbstractAsyncContextManager[ObjectReader]:
        """Opened before it yields: a missing object or a store that does not answer raises
        on entry (``ObjectNotFound``, ``StorageUnavailable``), before any byte."""
        return self._open_read(uri, offset, length)

    @asynccontextmanager
    async def _open_read(
        self, uri: str, offset: int, length: int | None
    ) -> AsyncIterator[ObjectReader]:
        store = await self.store_for(uri)
        async with store.open_read(uri, offset=offset, length=length) as reader:
            yield reader

    async def delete_prefix(self, prefix: str) -> int:
        """Delete every object under ``prefix`` (a folder-like prefix, ending in ``/``)."""
        store = await self.store_for(prefix)
        deleted = 0
        async for page in store.list(prefix):
            for info in page:
                await store.delete(info.uri)
                deleted += 1
        return deleted


@dataclass(frozen=True)
class ArtifactContent:
    """An artifact's bytes, not yet opened: ``open`` reads a range of them (the API's content
    route opens before it answers, and streams after)."""

    open: Callable[[int, int | None], AbstractAsyncContextManager[ObjectReader]]

    @classmethod
    def stored(cls, store: ArtifactStore, uri: str) -> ArtifactContent:
        return cls(lambda offset, length: store.open_read(uri, offset=offset, length=length))

    @classmethod
    def inline(cls, data: bytes, content_type: str) -> ArtifactContent:
        """A value kept in the database, served as the bytes it was measured as."""

        @asynccontextmanager
        async def opened(offset: int, length: int | None) -> AsyncIterator[ObjectReader]:
            if offset < 0 or offset > len(data):
                raise InvalidRange(f"offset {offset} is past the end ({len(data)} bytes)")
            span = len(data) - offset if length is None else max(0, min(length, len(data) - offset))
            info = ArtifactInfo(uri="inline:", size=len(data), content_type=content_type)
            yield _BytesReader(info, offset, span, data)

        return cls(opened)


@dataclass(frozen=True)
class _BytesReader:
    info: ArtifactInfo
    offset: int
    length: int
    data: bytes

    async def chunks(self, size: int = DEFAULT_CHUNK_SIZE) -> AsyncIterator[bytes]:
        end = self.offset + self.length
        for start in range(self.offset, end, max(size, 1)):
            yield self.data[start : min(start + max(size, 1), end)]


class StepStorage:
    """``ctx.storage``: the SDK's ``Storage`` for one step, scoped to its run's namespace."""

    def __init__(
        self, host: ArtifactStore, namespace: str, connection: NamedSettings | None
    ) -> None:
        self._host = host
        self._connection = connection
        self.namespace = namespace
        self.scope = NamespaceScope(host.root, namespace, host.files)

    async def _store(self, uri: str) -> ObjectStore:
        self.scope.check_object(uri)
        return await self._host.store_for(uri, self._connection)

    async def read_bytes(self, uri: str) -> bytes:
        return await (await self._store(uri)).read_bytes(uri)

    async def write_bytes(
        self, uri: str, data: bytes, content_type: str = DEFAULT_CONTENT_TYPE
    ) -> ArtifactInfo:
        return await (await self._store(uri)).write_bytes(uri, data, content_type)

    async def exists(self, uri: str) -> bool:
        return await (await self._store(uri)).exists(uri)

    async def delete(self, uri: str) -> None:
        await (await self._store(uri)).delete(uri)

    async def stat(self, uri: str) -> ArtifactInfo | None:
        return await (await self._store(uri)).stat(uri)

    async def copy(
        self, source: str, target: str, *, chunk_size: int = DEFAULT_CHUNK_SIZE
    ) -> ArtifactInfo:
        """On the server when one store (one backend, one set of settings) holds both."""
        from_store, to_store = await self._store(source), await self._store(target)
        if from_store is to_store:
            return await from_store.copy(source, target)
        return await stream_copy(
            from_store, source, to_store, target, chunk_size=max(chunk_size, 1)
        )

    async def list_pages(
        self, prefix: str, *, start_after: str | None = None, page_size: int = 1000
    ) -> AsyncIterator[Sequence[ArtifactInfo]]:
        prefix = self.scope.check_prefix(prefix)
        store = await self._host.store_for(prefix, self._connection)
        async for page in store.list(prefix, start_after=start_after, page_size=page_size):
            yield page

    async def list(self, pattern: str) -> list[ArtifactInfo]:
        """A glob: the literal prefix listed in pages, the rest matched (``glob_prefix``)."""
        canonical = _canonical(pattern)
        prefix, matcher = glob_prefix(canonical(pattern))
        if canonical is unquote:  # listed as the store writes URIs: the path quoted again
            prefix = "file://" + quote(prefix.removeprefix("file://"))
        found: list[ArtifactInfo] = []
        async for page in self.list_pages(prefix):
            found += [i for i in page if matcher is None or matcher.match(canonical(i.uri))]
        return found

    async def open_read(
        self, uri: str, *, chunk_size: int = DEFAULT_CHUNK_SIZE
    ) -> AsyncIterator[bytes]:
        store = await self._store(uri)
        async with store.open_read(uri) as reader:
            async for chunk in reader.chunks(chunk_size):
                yield chunk

    def open_write(
        self, uri: str, content_type: str = DEFAULT_CONTENT_TYPE, *, size: int | None = None
    ) -> AbstractAsyncContextManager[ObjectWriter]:
        return self._open_write(uri, content_type, size)

    @asynccontextmanager
    async def _open_write(
        self, uri: str, content_type: str, size: int | None
    ) -> AsyncIterator[ObjectWriter]:
        store = await self._store(uri)
        async with store.open_write(uri, content_type=content_type, size=size) as writer:
            yield writer


@dataclass(frozen=True)
class NamespaceScope:
    """What a step of ``namespace`` may address: anything but other namespaces' artifacts."""

    root: ArtifactRoot
    namespace: str
    files: FileStorage | None

    @property
    def own(self) -> str:
        """The namespace's part of the root, as a listing prefix (ending in ``/``)."""
        return self.root.namespace_root(self.namespace) + "/"

    def check_object(self, uri: str) -> None:
        """Refuse an object URI in another namespace's artifacts (or that could reach them)."""
        scheme = scheme_of(uri)
        if scheme == "file":
            if self.files is not None and not self._own_path(self.files.path(uri)):
                raise self._refused(uri)
            return
        if scheme != self.root.scheme:
            return
        self._check_segments(uri)
        if (uri + "/").startswith(self.root.uri + "/") and not uri.startswith(self.own):
            raise self._refused(uri)

    def check_prefix(self, prefix: str) -> str:
        """The prefix to list, or a refusal when it reaches beyond this namespace's part.

        The namespace's folder written without its slash is listed as the folder (as a
        plain prefix ``.../namespaces/team-a`` would also list ``team-ab``).
        """
        scheme = scheme_of(prefix)
        if scheme == "file":
            return self._check_file_prefix(prefix) if self.files is not None else prefix
        if scheme != self.root.scheme:
            return prefix
        self._check_segments(prefix, trailing_slash=True)
        if prefix == self.own.removesuffix("/") or prefix.startswith(self.own):
            return self.own if prefix == self.own.removesuffix("/") else prefix
        reaches_in = prefix.startswith(self.root.uri + "/") or (self.root.uri + "/").startswith(
            prefix
        )
        if reaches_in:
            raise self._refused(prefix, listing=True)
        return prefix

    def _check_file_prefix(self, prefix: str) -> str:
        assert self.files is not None
        path = self.files.path(prefix)
        own = self._own_folder()
        if path == own:
            return self.files.uri(own) + "/"
        if not self._own_path(path):
            raise self._refused(prefix, listing=True)
        return prefix

    def _own_folder(self) -> Path:
        assert self.files is not None
        return self.files.root / NAMESPACES / self.namespace

    def _own_path(self, path: Path) -> bool:
        return self._own_folder() in path.parents

    def _check_segments(self, uri: str, *, trailing_slash: bool = False) -> None:
        if _authority(uri) == _authority(self.root.uri) and _odd_segments(uri, trailing_slash):
            raise StorageRefused(
                f"{uri}: an empty, '.' or '..' path segment on the artifact root's "
                f"{_authority(uri)} is refused (a server may resolve it into another namespace)"
            )

    def _refused(self, uri: str, *, listing: bool = False) -> StorageRefused:
        what = "lists beyond" if listing else "is outside"
        return StorageRefused(
            f"{uri} {what} namespace {self.namespace}'s artifacts: a step reaches only "
            f"{self.own} of the artifact root {self.root.uri}"
        )


def scheme_of(uri: str) -> str:
    """The URI's scheme; refused unless written in lower case, so no check can be dodged
    by ``S3://`` reaching a backend that reads schemes without regard to case."""
    scheme, sep, _ = uri.partition("://")
    if not sep or not scheme:
        raise StorageRefused(f"{uri!r} is not a URI (write scheme://..., e.g. s3://bucket/key)")
    if scheme != scheme.lower():
        raise StorageRefused(f"{uri}: write the scheme in lower case ({scheme.lower()}://)")
    return scheme


def _authority(uri: str) -> str:
    return uri.partition("://")[2].partition("/")[0]


def _odd_segments(uri: str, trailing_slash: bool = True) -> bool:
    path = uri.partition("://")[2].partition("/")[2]
    segments = path.split("/")
    if trailing_slash and segments and segments[-1] == "":
        segments = segments[:-1]
    return any(s in ("", ".", "..") for s in segments) if path else False


def _canonical(uri: str) -> Callable[[str], str]:
    """How URIs of ``uri``'s scheme compare: file:// paths decoded, others as written."""
    return unquote if uri.startswith("file://") else _same


def _same(text: str) -> str:
    return text


def _fingerprint(connection: NamedSettings | None) -> str | None:
    """Which store a connection's settings share: equal settings, one store (kept in memory
    only; the digest is of the values, so a rotated secret opens a new store)."""
    if connection is None:
        return None
    text = json.dumps(dict(connection.values), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _config(
    scheme: str, backend: StorageBackend[Any], connection: NamedSettings | None
) -> BaseModel | None:
    """The backend's settings from a connection; the error names fields, never values."""
    if connection is None:
        return None
    try:
        return type(backend).config_model.model_validate(dict(connection.values))
    except ValidationError as err:
        first = err.errors(include_url=False, include_input=False, include_context=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "settings"
        raise StorageRefused(
            f"connection {connection.name} does not fit the {scheme}:// settings: "
            f"{where}: {first['msg']}"
        ) from None
