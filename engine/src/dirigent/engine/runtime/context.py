"""The engine's side of the block contract: one StepContext per attempt.

Scoped access to everything a block may touch. Log lines are buffered here and written in
the transaction that records the attempt's outcome, so a run's log and its outcome can never
disagree; each is also mirrored to the process log at debug level.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any, TypeVar

import structlog
from pydantic import BaseModel, JsonValue, ValidationError

from dirigent.engine.infrastructure.artifacts import ArtifactStore, NamedSettings
from dirigent.engine.shapes.attempts import LogLine
from dirigent.engine.shapes.manifests.pipeline import Step
from dirigent.sdk import BlockFailure, ErrorClass, Message, Runs, Sensor
from dirigent.sdk.secrets import redact, validation_summary

M = TypeVar("M", bound=BaseModel)

CONNECTION_UNAVAILABLE = Message(
    "engine.connection.unavailable", "connection '{name}' is not available to this step: {why}"
)

_log = structlog.get_logger("dirigent.step")


def timeout_of(step: Step) -> dt.timedelta | None:
    """``ctx.timeout``: the step's timeout, as the engine bounds the attempt's calls by it."""
    return step.timeout.to_timedelta() if step.timeout is not None else None


def deadline_of(step: Step, block: object, first_started_at: dt.datetime) -> dt.datetime | None:
    """``ctx.deadline``: the attempt's first start plus the deadline the engine enforces
    (a sensor's falls back to its block's default; an operator's is the step's or none)."""
    deadline = step.deadline
    if deadline is None and isinstance(block, Sensor):
        deadline = block.spec.default_deadline
    return first_started_at + deadline.to_timedelta() if deadline is not None else None


def storage_connection(
    config: Any, connections: Mapping[str, dict[str, Any]]
) -> NamedSettings | None:
    """The connection ``ctx.storage`` opens URIs outside the artifact root with: the one the
    step's config names in ``connection`` (opened only when the block declares that field)."""
    name = config.get("connection") if isinstance(config, dict) else None
    if not isinstance(name, str) or name not in connections:
        return None
    return NamedSettings(name, connections[name])


class BufferedLog:
    """ctx.log: kept until the outcome commit; mirrored to the process log at debug."""

    def __init__(self, bound: dict[str, Any]) -> None:
        self.lines: list[LogLine] = []
        self._bound = bound

    def _add(self, level: str, message: str, fields: dict[str, JsonValue]) -> None:
        self.lines.append(LogLine(level, message, dict(fields)))
        _log.debug(message, level_requested=level, **self._bound, **fields)

    def debug(self, message: str, **fields: JsonValue) -> None:
        self._add("debug", message, fields)

    def info(self, message: str, **fields: JsonValue) -> None:
        self._add("info", message, fields)

    def warning(self, message: str, **fields: JsonValue) -> None:
        self._add("warning", message, fields)

    def error(self, message: str, **fields: JsonValue) -> None:
        self._add("error", message, fields)


class EngineContext:
    """A StepContext for one attempt."""

    def __init__(
        self,
        *,
        namespace: str,
        pipeline: str,
        run_id: int,
        step: str,
        attempt: int,
        attempt_id: int,
        run_item_id: int | None,
        item: JsonValue | None,
        started_at: dt.datetime,
        cursor: dict[str, JsonValue] | None,
        params: Mapping[str, JsonValue],
        storage: ArtifactStore,
        connections: Mapping[str, dict[str, Any]] | None = None,
        storage_connection: NamedSettings | None = None,
        runs: Runs | None = None,
        timeout: dt.timedelta | None = None,
        deadline: dt.datetime | None = None,
    ) -> None:
        self.namespace = namespace
        self.pipeline = pipeline
        self.run_id = run_id
        self.step = step
        self.attempt = attempt
        self.attempt_id = attempt_id
        self.run_item_id = run_item_id
        self.item = item
        self.started_at = started_at
        self.timeout = timeout
        self.deadline = deadline
        self.cursor = cursor
        self.params = params
        self.storage = storage.for_step(namespace, storage_connection)
        self.scratch = storage.run_prefix(namespace, run_id)
        self.log = BufferedLog({"run_id": run_id, "step": step, "attempt": attempt})
        self._connections = dict(connections or {})
        self._secrets: frozenset[str] = getattr(connections, "secrets", frozenset())
        self._runs = runs

    @property
    def runs(self) -> Runs:
        if self._runs is None:
            raise BlockFailure(
                Message(
                    "engine.runs.unavailable", "starting runs from a step is not available here"
                ),
                error_class=ErrorClass.REJECTED,
            )
        return self._runs

    def connection(self, name: str, model: type[M]) -> M:
        values = self._connections.get(name)
        if values is None:
            raise BlockFailure(
                CONNECTION_UNAVAILABLE,
                error_class=ErrorClass.REJECTED,
                name=name,
                why="it does not exist, or the step's config does not name it",
            )
        try:
            return model.model_validate(values)
        except ValidationError as err:
            # Never quote the refused input: it holds the connection's opened secrets.
            why = validation_summary(err, self._secrets)
            raise BlockFailure(
                CONNECTION_UNAVAILABLE, error_class=ErrorClass.REJECTED, name=name, why=why
            ) from None
        except ValueError as err:
            why = redact(str(err), self._secrets)
            raise BlockFailure(
                CONNECTION_UNAVAILABLE, error_class=ErrorClass.REJECTED, name=name, why=why
            ) from None

    async def capture(
        self, name: str, data: bytes, content_type: str = "application/octet-stream"
    ) -> str:
        uri = f"{self.scratch}/steps/{self.step}/{self.attempt_id}/{name}"
        await self.storage.write_bytes(uri, data, content_type)
        return uri
