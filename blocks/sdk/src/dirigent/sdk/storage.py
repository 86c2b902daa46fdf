"""Storage backends: how a plugin serves a URI scheme (``s3://``) to every part of dirigent.

Why a plugin surface: blocks, the artifact store and the API's artifact route all name
objects by URI and never by client; a backend package adds a scheme and nothing else
changes. A backend is two objects. The ``StorageBackend`` is contributed once (through
``Contribution.storage_backends``): it names its scheme and the settings model that opens
it. The ``ObjectStore`` is what it opens, once per set of settings (a client session with
its pooled connections); the host keeps one per scheme (per Connection), routes each URI by
its scheme, and closes the store at shutdown.

Promises every store keeps, which the host, the blocks and the API rely on:

* Streamed both ways: memory held is the backend's buffer (one part), never the object.
* All or nothing: an object appears at its URI only when its writer leaves cleanly; a
  writer left by an exception leaves nothing behind (a multipart upload is aborted).
* ``open_read`` opens before it yields: a missing object or an unreachable backend raises
  on entry, before the first byte, so a caller that streams to a client can still answer
  with an error. ``reader.info`` describes the whole object; ``offset``/``length`` pick a
  byte range of it.
* ``list`` walks a prefix (a plain string prefix of the URI, as S3 does) in pages, sorted
  by URI; ``start_after`` resumes after a URI, so a sensor's cursor is the last URI seen.
* ``delete`` of a missing object is not an error.
* ``copy`` inside one store is server-side where the backend can do it; the base class
  streams it.

The errors a store raises, one tree; each also subclasses the builtin the blocks already
sort (``classify_default``), so a failing storage step is classified without new rules::

    StorageError
    ├── ObjectNotFound       (FileNotFoundError)  nothing at that URI
    ├── StorageRefused       (PermissionError)    a URI or request this store will not
    │                                             serve: another scheme, outside its root,
    │                                             access denied, a bad bucket name
    ├── InvalidRange         (ValueError)         an offset past the object's end
    └── StorageUnavailable   (ConnectionError)    unreachable after the store's own retries

Their messages name the URI or the endpoint and never a credential.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import ClassVar, Final, Generic, Protocol, TypeVar

from pydantic import BaseModel

from dirigent.sdk.context import ArtifactInfo, ObjectWriter

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_CONTENT_TYPE",
    "SCHEME_PATTERN",
    "InvalidRange",
    "ObjectNotFound",
    "ObjectReader",
    "ObjectStore",
    "StorageBackend",
    "StorageError",
    "StorageRefused",
    "StorageUnavailable",
    "glob_prefix",
    "stream_copy",
]

SCHEME_PATTERN: Final = r"^[a-z][a-z0-9+.-]*$"
"""A URI scheme as RFC 3986 spells it, lower case: ``file``, ``s3``, ``gs``."""

DEFAULT_CHUNK_SIZE: Final = 1 << 20
DEFAULT_CONTENT_TYPE: Final = "application/octet-stream"

StoreConfigT = TypeVar("StoreConfigT", bound=BaseModel)


class StorageError(Exception):
    """Something a store could not do; see the module docstring for the tree."""


class ObjectNotFound(StorageError, FileNotFoundError):
    """Nothing is stored at the URI."""


class StorageRefused(StorageError, PermissionError):
    """A URI or request this store will not serve (scheme, root, access, malformed name)."""


class InvalidRange(StorageError, ValueError):
    """A read's offset lies past the object's end."""


class StorageUnavailable(StorageError, ConnectionError):
    """The backend could not be reached, after the store's own retries."""


class ObjectReader(Protocol):
    """An opened object: what it is, and its bytes (or a range of them) in chunks."""

    @property
    def info(self) -> ArtifactInfo:
        """The whole object: its full size, content type, and etag where known."""
        ...

    @property
    def offset(self) -> int:
        """Where the bytes this reader yields start in the object."""
        ...

    @property
    def length(self) -> int:
        """How many bytes this reader yields (the range, clipped to the object's end)."""
        ...

    def chunks(self, size: int = DEFAULT_CHUNK_SIZE) -> AsyncIterator[bytes]:
        """The range's bytes, in chunks of at most ``size``; read once."""
        ...


class ObjectStore(ABC):
    """One opened backend: the five operations a backend writes, and what follows from them.

    Implement ``stat``, ``open_read``, ``open_write``, ``list`` and ``delete``; override
    ``copy`` when the backend copies server-side. URIs are absolute (``s3://bucket/key``);
    a URI of another scheme raises ``StorageRefused``.
    """

    @abstractmethod
    async def stat(self, uri: str) -> ArtifactInfo | None:
        """What is stored at ``uri``, or None when nothing is."""

    @abstractmethod
    def open_read(
        self, uri: str, *, offset: int = 0, length: int | None = None
    ) -> AbstractAsyncContextManager[ObjectReader]:
        """Open ``uri`` for reading ``length`` bytes from ``offset`` (None: to the end).

        Raises on entry: ``ObjectNotFound``, ``InvalidRange`` when ``offset`` is past the
        end (``offset == size`` is an empty read), ``StorageUnavailable``.
        """

    @abstractmethod
    def open_write(
        self, uri: str, *, content_type: str = DEFAULT_CONTENT_TYPE, size: int | None = None
    ) -> AbstractAsyncContextManager[ObjectWriter]:
        """A writer whose object replaces ``uri`` only when the block leaves cleanly.

        ``size``, when known, is the exact number of bytes that will be written: a backend
        may choose its upload strategy by it, and a different count fails the write.
        """

    @abstractmethod
    def list(
        self, prefix: str, *, start_after: str | None = None, page_size: int = 1000
    ) -> AsyncIterator[Sequence[ArtifactInfo]]:
        """Objects whose URI starts with ``prefix``, in pages of at most ``page_size``.

        Sorted by URI within and across pages; only URIs after ``start_after`` are listed.
        A write in progress is not an object and is never listed.
        """

    @abstractmethod
    async def delete(self, uri: str) -> None:
        """Remove the object at ``uri``; a missing object is not an error."""

    async def copy(self, source: str, target: str) -> ArtifactInfo:
        """Copy ``source`` to ``target``, both in this store; streamed unless overridden."""
        return await stream_copy(self, source, self, target)

    async def exists(self, uri: str) -> bool:
        """Whether an object is stored at ``uri``."""
        return await self.stat(uri) is not None

    async def read_bytes(self, uri: str) -> bytes:
        """The whole object in memory: for small objects only."""
        async with self.open_read(uri) as reader:
            return b"".join([chunk async for chunk in reader.chunks()])

    async def write_bytes(
        self, uri: str, data: bytes, content_type: str = DEFAULT_CONTENT_TYPE
    ) -> ArtifactInfo:
        """Store ``data`` at ``uri``, replacing it; visible only once complete."""
        async with self.open_write(uri, content_type=content_type, size=len(data)) as writer:
            await writer.write(data)
        return _written(writer, uri)


class StorageBackend(ABC, Generic[StoreConfigT]):
    """A URI scheme's backend, as a plugin contributes it.

    ``config_model`` holds what opens a store (an endpoint, a region, credentials typed
    ``SecretStr``). ``connection_kind``, when set, names the connection kind whose settings
    are this model, so an installation can point its artifact root at a Connection.
    """

    scheme: ClassVar[str]
    summary: ClassVar[str] = ""
    config_model: ClassVar[type[BaseModel]]
    connection_kind: ClassVar[str | None] = None

    @abstractmethod
    def open(self, config: StoreConfigT | None) -> AbstractAsyncContextManager[ObjectStore]:
        """A store for this scheme, closed when the context leaves.

        ``config`` None means the process's ambient settings and identity (for S3: the
        standard ``AWS_*`` environment, a web identity token, the instance's role).
        Opening must not reach the network; the first request does.
        """


async def stream_copy(
    source_store: ObjectStore,
    source: str,
    target_store: ObjectStore,
    target: str,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> ArtifactInfo:
    """Copy between any two stores, one chunk in memory at a time; all or nothing."""
    async with source_store.open_read(source) as reader:
        info = reader.info
        async with target_store.open_write(
            target, content_type=info.content_type, size=info.size
        ) as writer:
            async for chunk in reader.chunks(chunk_size):
                await writer.write(chunk)
    return _written(writer, target)


def _written(writer: ObjectWriter, uri: str) -> ArtifactInfo:
    info = writer.info
    if info is None:  # a store's bug: its writer left cleanly without saying what it stored
        raise StorageError(f"{uri}: the writer closed without reporting what it stored")
    return info


_GLOB_TOKEN: Final = re.compile(r"\*\*|\*|\?")


def glob_prefix(pattern: str) -> tuple[str, re.Pattern[str] | None]:
    """The literal prefix to ``list`` for a glob URI, and a regex the full URIs must match.

    ``*`` and ``?`` stay within one path segment, ``**`` crosses segments. A pattern without
    a wildcard is a plain prefix (the regex is None): everything under it matches.
    """
    first = _GLOB_TOKEN.search(pattern)
    if first is None:
        return pattern, None
    parts: list[str] = []
    last = 0
    for token in _GLOB_TOKEN.finditer(pattern):
        parts.append(re.escape(pattern[last : token.start()]))
        parts.append({"**": ".*", "*": "[^/]*", "?": "[^/]"}[token.group()])
        last = token.end()
    parts.append(re.escape(pattern[last:]))
    return pattern[: first.start()], re.compile("".join(parts) + r"\Z")
