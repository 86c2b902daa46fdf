"""A minimal in-memory StepContext, written against the protocol so mypy checks the fit."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import BaseModel, JsonValue

from dirigent.sdk import ArtifactInfo, RunSnapshot, StartedRun, StepContext

M = TypeVar("M", bound=BaseModel)


@dataclass
class FakeLog:
    lines: list[tuple[str, str, dict[str, JsonValue]]] = field(default_factory=list)

    def debug(self, message: str, **fields: JsonValue) -> None:
        self.lines.append(("debug", message, fields))

    def info(self, message: str, **fields: JsonValue) -> None:
        self.lines.append(("info", message, fields))

    def warning(self, message: str, **fields: JsonValue) -> None:
        self.lines.append(("warning", message, fields))

    def error(self, message: str, **fields: JsonValue) -> None:
        self.lines.append(("error", message, fields))


@dataclass
class FakeStorage:
    objects: dict[str, tuple[bytes, str]] = field(default_factory=dict)

    async def read_bytes(self, uri: str) -> bytes:
        if uri not in self.objects:
            raise FileNotFoundError(uri)
        return self.objects[uri][0]

    async def write_bytes(
        self, uri: str, data: bytes, content_type: str = "application/octet-stream"
    ) -> ArtifactInfo:
        self.objects[uri] = (data, content_type)
        return ArtifactInfo(uri=uri, size=len(data), content_type=content_type)

    async def exists(self, uri: str) -> bool:
        return uri in self.objects

    async def delete(self, uri: str) -> None:
        self.objects.pop(uri, None)


@dataclass
class FakeRuns:
    started: list[tuple[str, Mapping[str, JsonValue]]] = field(default_factory=list)

    async def start(
        self, pipeline: str, params: Mapping[str, JsonValue], *, max_depth: int
    ) -> StartedRun:
        self.started.append((pipeline, params))
        return StartedRun(
            run_id=len(self.started), namespace="ns", pipeline=pipeline, state="queued"
        )

    async def snapshot(self, run_id: int) -> RunSnapshot | None:
        return None

    async def cancel(self, run_id: int, *, reason: str) -> bool:
        return False


@dataclass
class FakeContext:
    namespace: str = "ns"
    pipeline: str = "demo"
    run_id: int = 1
    step: str = "load"
    attempt: int = 1
    attempt_id: int = 10
    run_item_id: int | None = None
    item: JsonValue | None = None
    started_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    cursor: dict[str, JsonValue] | None = None
    timeout: dt.timedelta | None = None
    deadline: dt.datetime | None = None
    params: Mapping[str, JsonValue] = field(default_factory=dict)
    log: FakeLog = field(default_factory=FakeLog)
    storage: FakeStorage = field(default_factory=FakeStorage)
    scratch: str = "file:///scratch/ns/1/"
    runs: FakeRuns = field(default_factory=FakeRuns)
    connections: dict[str, dict[str, object]] = field(default_factory=dict)

    def connection(self, name: str, model: type[M]) -> M:
        return model.model_validate(self.connections[name])

    async def capture(
        self, name: str, data: bytes, content_type: str = "application/octet-stream"
    ) -> str:
        uri = f"{self.scratch}{self.step}/{self.attempt}/{name}"
        await self.storage.write_bytes(uri, data, content_type)
        return uri


def make_context(**overrides: object) -> StepContext:
    ctx: StepContext = FakeContext(**overrides)  # type: ignore[arg-type]
    return ctx
