"""The step context: everything a block may touch, handed to it by the engine.

Why a protocol: blocks never import the engine and never build their own clients or hold
global state. The engine passes one ``StepContext`` per call, scoped to the attempt, and a
test passes a fake. Every member here is a promise the engine must keep for every block, so
the surface stays small; a block needing more asks for a new member, it does not reach
around the context.

Timing and durability promises the engine keeps:

* ``started_at`` is when the attempt first started, unchanged by later pokes, probes or a
  worker restart, so a wait measures itself from the attempt.
* ``cursor`` is what the previous ``NotYet`` left (sensors only; None otherwise).
* ``log`` entries are buffered and committed with the attempt's outcome, so logs and
  outcome never disagree.
* ``connection`` is synchronous: the engine snapshots connections when it claims the
  attempt, and secrets are opened here and nowhere else.
* ``timeout`` and ``deadline`` are the step's limits as the engine enforces them, so a
  block handing work to another system can hand the same limits on (docker.run makes the
  timeout its Job's ``activeDeadlineSeconds``) and the work stops there even if no worker
  is left to stop it.
* ``runs`` starts and reads runs of this instance (for blocks composing pipelines); a run
  started through it is attributed to this run, and ``max_depth`` bounds the chain.
"""

from __future__ import annotations

import builtins
import datetime as dt
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, JsonValue

__all__ = [
    "ArtifactInfo",
    "ObjectWriter",
    "RunSnapshot",
    "Runs",
    "StartedRun",
    "StepContext",
    "StepLog",
    "Storage",
]

M = TypeVar("M", bound=BaseModel)


class StepLog(Protocol):
    """The attempt's log: a message plus structured JSON fields."""

    def debug(self, message: str, **fields: JsonValue) -> None: ...
    def info(self, message: str, **fields: JsonValue) -> None: ...
    def warning(self, message: str, **fields: JsonValue) -> None: ...
    def error(self, message: str, **fields: JsonValue) -> None: ...


class ArtifactInfo(BaseModel):
    """What storage knows about one stored object.

    ``sha256`` is the content's digest where the backend knows it (always after a write);
    ``etag`` is the backend's version tag (S3's ETag), ``modified_at`` its last write.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    uri: str
    size: int = Field(ge=0)
    content_type: str = "application/octet-stream"
    sha256: str | None = None
    etag: str | None = None
    modified_at: dt.datetime | None = None


class ObjectWriter(Protocol):
    """A stream being written to storage; the object appears whole when the block closes it."""

    async def write(self, data: bytes) -> None:
        """Append ``data``; memory held is bounded by the backend's buffer, not the object."""
        ...

    @property
    def info(self) -> ArtifactInfo | None:
        """What was stored, once the writer closed cleanly; None before."""
        ...


class Storage(Protocol):
    """Storage over URIs: a scheme registry (``file://`` in core; more by backend packages).

    Streamed both ways, so moving a large object holds one buffer, never the object. Writes
    are all or nothing: a reader never sees a half-written object, and a writer left by an
    exception leaves nothing behind. Refusals raise ``PermissionError``: a URI whose scheme
    no backend serves, a ``file://`` URI outside the artifact root, and any URI in another
    namespace's part of the artifact root (a step reaches its own namespace's artifacts only).

    Which credentials reach an object: the artifact root's own (the installation's) for URIs
    under it; otherwise the connection the step names in its ``connection`` field, if any;
    otherwise the worker's ambient identity (for S3, the standard ``AWS_*`` environment).
    """

    async def read_bytes(self, uri: str) -> bytes:
        """The object's content; ``FileNotFoundError`` if it does not exist."""
        ...

    async def write_bytes(
        self, uri: str, data: bytes, content_type: str = "application/octet-stream"
    ) -> ArtifactInfo:
        """Store ``data`` at ``uri``, replacing it; visible only once complete."""
        ...

    async def exists(self, uri: str) -> bool:
        """Whether an object is stored at ``uri``."""
        ...

    async def delete(self, uri: str) -> None:
        """Remove the object; deleting a missing object is not an error."""
        ...

    async def stat(self, uri: str) -> ArtifactInfo | None:
        """Size and content type of the object, or None when there is none."""
        ...

    async def list(self, pattern: str) -> builtins.list[ArtifactInfo]:
        """Objects matching a glob URI (``file:///root/in/*.csv``), sorted by URI.

        ``*`` and ``?`` stay within one path segment; ``**`` crosses segments. A pattern
        without a wildcard lists everything under that prefix.
        """
        ...

    def list_pages(
        self, prefix: str, *, start_after: str | None = None, page_size: int = 1000
    ) -> AsyncIterator[Sequence[ArtifactInfo]]:
        """Objects whose URI starts with ``prefix`` (a plain string prefix), in sorted pages.

        Only URIs after ``start_after`` are listed, so the last URI a sensor saw is a
        cursor to resume from.
        """
        ...

    def open_read(self, uri: str, *, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
        """The object's content in chunks of at most ``chunk_size`` bytes."""
        ...

    def open_write(
        self, uri: str, content_type: str = "application/octet-stream", *, size: int | None = None
    ) -> AbstractAsyncContextManager[ObjectWriter]:
        """A writer whose object appears at ``uri`` only when the block leaves cleanly.

        ``size``, when known, is the exact number of bytes that will be written (a backend
        picks its upload strategy by it; a different count fails the write).
        """
        ...

    async def copy(self, source: str, target: str, *, chunk_size: int = 1 << 20) -> ArtifactInfo:
        """Copy ``source`` to ``target``: on the server when one backend (and one set of
        credentials) holds both, else streamed through the worker ``chunk_size`` at a time."""
        ...


class StartedRun(BaseModel):
    """A run started through ``ctx.runs.start``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: int
    namespace: str
    pipeline: str
    state: str


class RunSnapshot(BaseModel):
    """A run's current state as ``ctx.runs.snapshot`` sees it.

    ``state`` is the engine's run state name; ``terminal`` says it will not change again.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: int
    namespace: str
    pipeline: str
    state: str
    terminal: bool
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    message: str | None = None
    failed_step: str | None = None
    outputs: dict[str, JsonValue] = Field(default_factory=dict)


class Runs(Protocol):
    """Scoped access to this instance's own runs, for a block that composes pipelines."""

    async def start(
        self, pipeline: str, params: Mapping[str, JsonValue], *, max_depth: int
    ) -> StartedRun:
        """Start ``pipeline`` (same namespace) with ``params``; refuses beyond ``max_depth``."""
        ...

    async def snapshot(self, run_id: int) -> RunSnapshot | None:
        """The run's state, or None if there is no such run visible to this step."""
        ...

    async def cancel(self, run_id: int, *, reason: str) -> bool:
        """Ask the run to cancel; False if it had already finished."""
        ...


class StepContext(Protocol):
    """The engine's side of the bargain, scoped to one attempt of one step."""

    @property
    def namespace(self) -> str:
        """The namespace the pipeline lives in."""
        ...

    @property
    def pipeline(self) -> str:
        """The pipeline's name."""
        ...

    @property
    def run_id(self) -> int: ...

    @property
    def step(self) -> str:
        """The step's name in the document."""
        ...

    @property
    def attempt(self) -> int:
        """The attempt number, from 1."""
        ...

    @property
    def attempt_id(self) -> int:
        """The attempt's durable id: stable across probes, pokes and worker restarts."""
        ...

    @property
    def run_item_id(self) -> int | None:
        """The fan-out item's id when the step runs ``forEach``, else None."""
        ...

    @property
    def item(self) -> JsonValue | None:
        """The fan-out item's value when the step runs ``forEach``, else None."""
        ...

    @property
    def started_at(self) -> dt.datetime:
        """When the attempt first started (timezone-aware UTC)."""
        ...

    @property
    def timeout(self) -> dt.timedelta | None:
        """The step's ``timeout``: how long this attempt's work may take; None: no limit."""
        ...

    @property
    def deadline(self) -> dt.datetime | None:
        """When the engine gives up waiting on this attempt (its first start plus the step's
        ``deadline``, timezone-aware UTC); None when the step sets none."""
        ...

    @property
    def cursor(self) -> dict[str, JsonValue] | None:
        """What the previous ``NotYet`` left for this poke; None on the first."""
        ...

    @property
    def params(self) -> Mapping[str, JsonValue]:
        """The run's resolved params."""
        ...

    @property
    def log(self) -> StepLog: ...

    @property
    def storage(self) -> Storage: ...

    @property
    def scratch(self) -> str:
        """The run's scratch URI prefix, ending in ``/``: for what later steps must read."""
        ...

    @property
    def runs(self) -> Runs: ...

    def connection(self, name: str, model: type[M]) -> M:
        """The named connection (same namespace), validated as ``model``, secrets opened."""
        ...

    async def capture(
        self, name: str, data: bytes, content_type: str = "application/octet-stream"
    ) -> str:
        """Store ``data`` under this attempt's part of scratch; return the object's URI."""
        ...
