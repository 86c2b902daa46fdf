"""The ``storage`` family: read, write, copy, list (operators) and exists (sensor).

Everything goes through ``ctx.storage``, so a block names URIs and never paths, and a
backend package adds a scheme without these blocks changing. ``storage.read`` is the only
way a value comes in from storage and ``storage.write`` the only way one goes out;
``storage.copy`` moves an object without it ever being a value: on the server when one
backend holds both ends (S3 to S3), else streamed chunk by chunk, so a 1 GB copy holds one
buffer. Writes are all or nothing (the backend's promise).

Each block takes an optional ``connection``: the Connection (for ``s3://``, of kind ``s3``)
whose settings reach URIs outside the artifact root; without one the worker's ambient
identity does. The artifact root always uses the installation's own settings, and a step
reaches only its namespace's part of it (``ctx.storage`` refuses the rest).

``storage.exists`` waits for a key, or for anything under a prefix (a URI ending in ``/``)
or matching a glob. With ``resume`` a prefix watch keeps the last URI it listed in its
cursor and lists only what sorts after it on the next poke: one short request per poke
however long the prefix, for keys that arrive in order (dates, sequence numbers).
"""

from __future__ import annotations

import json
from typing import ClassVar, Literal

from pydantic import BaseModel, Field, JsonValue

from dirigent.blocks.base import Config, Output
from dirigent.sdk import (
    DEFAULT_CHUNK_SIZE,
    ArtifactInfo,
    BlockFailure,
    Duration,
    ErrorClass,
    Message,
    NotYet,
    Operator,
    OperatorSpec,
    Sensor,
    SensorSpec,
    Size,
    StepContext,
    classify_default,
    glob_prefix,
)

__all__ = [
    "StorageCopyOperator",
    "StorageExistsSensor",
    "StorageListOperator",
    "StorageReadOperator",
    "StorageWriteOperator",
]

NOT_FOUND = Message("storage.not_found", "{uri} does not exist")
TOO_LARGE = Message(
    "storage.too_large", "{uri} is {size} bytes, above maxSize {max_size}; use storage.copy"
)
NOT_JSON = Message("storage.not_json", "{uri} is not JSON: {error}")
REFUSED = Message("storage.refused", "{error}")


def _refused(err: PermissionError) -> BlockFailure:
    return BlockFailure(REFUSED, error_class=ErrorClass.REJECTED, error=str(err))


async def _stat(ctx: StepContext, uri: str) -> ArtifactInfo:
    try:
        info = await ctx.storage.stat(uri)
    except PermissionError as err:
        raise _refused(err) from err
    if info is None:
        raise BlockFailure(NOT_FOUND, error_class=ErrorClass.REJECTED, uri=uri)
    return info


class ObjectOutput(Output):
    uri: str
    size: int
    content_type: str
    sha256: str | None = None


def _object(info: ArtifactInfo) -> ObjectOutput:
    return ObjectOutput(
        uri=info.uri, size=info.size, content_type=info.content_type, sha256=info.sha256
    )


CONNECTION_FIELD = Field(
    default=None,
    description="A Connection (for s3://, of kind s3) whose settings reach URIs outside the "
    "artifact root; unset: the worker's ambient identity.",
)


class _StorageBlock:
    def classify_error(self, error: Exception) -> ErrorClass:
        if isinstance(error, FileNotFoundError | PermissionError | IsADirectoryError):
            return ErrorClass.REJECTED
        return classify_default(error)


class ReadConfig(Config):
    uri: str
    format: Literal["json", "text"] = Field(default="json", description="How to read the bytes.")
    max_size: Size = Field(default=Size(16 * 1024 * 1024), description="Refuse larger objects.")
    connection: str | None = CONNECTION_FIELD


class ReadOutput(Output):
    value: JsonValue
    size: int
    content_type: str


class StorageReadOperator(_StorageBlock, Operator[ReadConfig, ReadOutput]):
    """Reads an object into a value (JSON or text) that later steps reference."""

    spec: ClassVar[OperatorSpec] = OperatorSpec(
        id="storage.read",
        summary="Read a stored object as a value (JSON or text).",
        idempotent=True,
    )
    config_model: ClassVar[type[BaseModel]] = ReadConfig
    output_model: ClassVar[type[BaseModel]] = ReadOutput

    async def execute(self, config: ReadConfig, ctx: StepContext) -> ReadOutput:
        info = await _stat(ctx, config.uri)
        if info.size > config.max_size.bytes:
            raise BlockFailure(
                TOO_LARGE,
                error_class=ErrorClass.REJECTED,
                uri=config.uri,
                size=info.size,
                max_size=str(config.max_size),
            )
        data = await ctx.storage.read_bytes(config.uri)
        value: JsonValue
        if config.format == "json":
            try:
                value = json.loads(data)
            except ValueError as err:
                raise BlockFailure(
                    NOT_JSON, error_class=ErrorClass.REJECTED, uri=config.uri, error=str(err)
                ) from err
        else:
            value = data.decode("utf-8", errors="replace")
        return ReadOutput(value=value, size=len(data), content_type=info.content_type)


class WriteConfig(Config):
    uri: str
    value: JsonValue = Field(default=None, description="Written as JSON (format json).")
    format: Literal["json", "text"] = Field(
        default="json", description="json: the value as JSON; text: the value, a string, as is."
    )
    content_type: str | None = Field(default=None, description="Default by format.")
    connection: str | None = CONNECTION_FIELD


class StorageWriteOperator(_StorageBlock, Operator[WriteConfig, ObjectOutput]):
    """Writes a value to an object, all or nothing."""

    spec: ClassVar[OperatorSpec] = OperatorSpec(
        id="storage.write", summary="Write a value to a stored object.", idempotent=True
    )
    config_model: ClassVar[type[BaseModel]] = WriteConfig
    output_model: ClassVar[type[BaseModel]] = ObjectOutput

    async def execute(self, config: WriteConfig, ctx: StepContext) -> ObjectOutput:
        if config.format == "text" and isinstance(config.value, str):
            data, default_type = config.value.encode(), "text/plain"
        else:
            data, default_type = json.dumps(config.value).encode(), "application/json"
        try:
            info = await ctx.storage.write_bytes(
                config.uri, data, config.content_type or default_type
            )
        except PermissionError as err:
            raise _refused(err) from err
        return _object(info)


class CopyConfig(Config):
    source: str
    target: str
    chunk_size: Size = Field(
        default=Size(DEFAULT_CHUNK_SIZE),
        description="Bytes held at a time when the copy streams through the worker.",
    )
    connection: str | None = CONNECTION_FIELD


class StorageCopyOperator(_StorageBlock, Operator[CopyConfig, ObjectOutput]):
    """Copies an object: on the server within one backend, else streamed one chunk at a time."""

    spec: ClassVar[OperatorSpec] = OperatorSpec(
        id="storage.copy",
        summary="Copy a stored object (server-side within a backend, else streamed).",
        idempotent=True,
    )
    config_model: ClassVar[type[BaseModel]] = CopyConfig
    output_model: ClassVar[type[BaseModel]] = ObjectOutput

    async def execute(self, config: CopyConfig, ctx: StepContext) -> ObjectOutput:
        await _stat(ctx, config.source)
        try:
            stored = await ctx.storage.copy(
                config.source, config.target, chunk_size=config.chunk_size.bytes
            )
        except PermissionError as err:
            raise _refused(err) from err
        except FileNotFoundError as err:  # gone between the stat and the copy
            raise BlockFailure(
                NOT_FOUND, error_class=ErrorClass.REJECTED, uri=config.source
            ) from err
        ctx.log.info("copied", source=config.source, target=config.target, size=stored.size)
        return _object(stored)


class ListConfig(Config):
    pattern: str = Field(description="A glob URI: '*' within a segment, '**' across.")
    connection: str | None = CONNECTION_FIELD


class ListOutput(Output):
    items: list[ObjectOutput]
    count: int


class StorageListOperator(_StorageBlock, Operator[ListConfig, ListOutput]):
    """Lists the objects matching a glob, sorted by URI: a fan-out's source."""

    spec: ClassVar[OperatorSpec] = OperatorSpec(
        id="storage.list", summary="List stored objects matching a glob.", idempotent=True
    )
    config_model: ClassVar[type[BaseModel]] = ListConfig
    output_model: ClassVar[type[BaseModel]] = ListOutput

    async def execute(self, config: ListConfig, ctx: StepContext) -> ListOutput:
        try:
            found = await ctx.storage.list(config.pattern)
        except PermissionError as err:
            raise _refused(err) from err
        return ListOutput(items=[_object(i) for i in found], count=len(found))


class ExistsConfig(Config):
    uri: str = Field(
        description="An object URI; a prefix ending in '/'; or a glob: holds when anything "
        "there matches."
    )
    min_size: Size = Field(default=Size(0), description="Only an object at least this big counts.")
    resume: bool = Field(
        default=False,
        description="A prefix or glob watch lists only what sorts after the last URI the "
        "previous poke listed (kept in the sensor's cursor): one short listing per poke "
        "however long the prefix, for keys that arrive in sorted order (dates, sequence "
        "numbers); a key sorting before one already listed is not seen.",
    )
    connection: str | None = CONNECTION_FIELD


class StorageExistsSensor(_StorageBlock, Sensor[ExistsConfig, ListOutput]):
    """Waits until an object (or anything under a prefix, or matching a glob) exists."""

    spec: ClassVar[SensorSpec] = SensorSpec(
        id="storage.exists",
        summary="Wait until a stored object (or a prefix's or a glob's match) exists.",
        default_poll=Duration.of(seconds=30),
    )
    config_model: ClassVar[type[BaseModel]] = ExistsConfig
    output_model: ClassVar[type[BaseModel]] = ListOutput

    async def poke(self, config: ExistsConfig, ctx: StepContext) -> ListOutput | NotYet:
        after: str | None = None
        try:
            if config.resume and _watches(config.uri):
                found, after = await _listed_after(config.uri, ctx)
            elif _watches(config.uri):
                found = await ctx.storage.list(config.uri)
            else:
                info = await ctx.storage.stat(config.uri)
                found = [info] if info is not None else []
        except PermissionError as err:
            raise _refused(err) from err
        found = [i for i in found if i.size >= config.min_size.bytes]
        if not found:
            cursor: dict[str, JsonValue] | None = {"after": after} if after else None
            return NotYet(message=f"waiting for {config.uri}", cursor=cursor)
        return ListOutput(items=[_object(i) for i in found], count=len(found))


def _watches(uri: str) -> bool:
    """A prefix (ending in '/') or a glob: listed, not looked up as one key."""
    return uri.endswith("/") or any(c in uri for c in "*?")


async def _listed_after(pattern: str, ctx: StepContext) -> tuple[list[ArtifactInfo], str | None]:
    """What matches after the cursor's URI, and the last URI listed (the next cursor)."""
    prefix, matcher = glob_prefix(pattern)
    last = ctx.cursor.get("after") if ctx.cursor else None
    after = last if isinstance(last, str) else None
    found: list[ArtifactInfo] = []
    async for page in ctx.storage.list_pages(prefix, start_after=after):
        found += [i for i in page if matcher is None or matcher.match(i.uri)]
        after = page[-1].uri if page else after
    return found, after
