"""Following one run: its transitions and its log lines as one stream of records, in order.

A run is followed through a ``RunSource`` — the engine itself for ``run --local`` and
``dev``; the API for a run on a server — so the stream is the same wherever the run is.
Transitions come from the engine's event subscription (run, step and attempt, resumable by
cursor, so none is missed between starting a run and following it); log lines from the log
pages. Each tick merges both by timestamp, so the stream reads as cause then effect.

Records are plain dicts with a ``kind`` (``run``, ``step``, ``attempt``, ``log``,
``failure``); the renderer decides how a person or a pipe sees them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Protocol

from dirigent.engine.shapes.statuses import RUN_TERMINAL
from dirigent.engine.shapes.views import (
    EngineEvent,
    FailureView,
    LogView,
    Page,
    RunDetail,
    encode_cursor,
)

if TYPE_CHECKING:
    # Only for the annotation: a client command must not load the store to watch a run.
    from dirigent.engine import Engine

__all__ = ["EngineRunSource", "Record", "RunSource", "follow"]

Record = dict[str, Any]
# After the run is seen terminal, how long to wait for its own terminal event to be readable
# (events become visible once no older transaction is open).
_FINISH_DEADLINE = 5.0


class RunSource(Protocol):
    """Where a followed run's state comes from."""

    def events(self) -> AsyncIterator[EngineEvent]: ...

    async def detail(self) -> RunDetail | None: ...

    async def logs(self, cursor: str | None) -> Page[LogView]: ...

    async def failures(self) -> list[FailureView]: ...


class EngineRunSource:
    """A run read straight from an ``Engine`` in this process."""

    def __init__(self, engine: Engine, namespace: str, run_id: int) -> None:
        self.engine, self.namespace, self.run_id = engine, namespace, run_id

    def events(self) -> AsyncIterator[EngineEvent]:
        # From the beginning of this run's events: the subscription starts after the run.
        return self.engine.events.subscribe(
            run_id=self.run_id, cursor=encode_cursor(0, 0), poll=0.2
        )

    async def detail(self) -> RunDetail | None:
        return await self.engine.runs.get(self.namespace, self.run_id)

    async def logs(self, cursor: str | None) -> Page[LogView]:
        return await self.engine.runs.logs(self.namespace, self.run_id, cursor=cursor)

    async def failures(self) -> list[FailureView]:
        return await self.engine.runs.failures(self.namespace, self.run_id)


def event_record(event: EngineEvent) -> Record:
    base: Record = {"kind": event.entity, "at": event.at.isoformat(), "run": event.run_id}
    if event.entity == "run":
        return {**base, "status": event.status, "previous": event.previous}
    out = {**base, "step": event.step, "status": event.status, "item": event.item_index}
    if event.entity == "attempt":
        out["attempt"] = event.number
    return out


def log_record(line: LogView) -> Record:
    return {
        "kind": "log",
        "at": line.created_at.isoformat(),
        "step": line.step,
        "level": line.level,
        "message": line.message,
        "fields": line.fields,
    }


def failure_record(f: FailureView) -> Record:
    return {
        "kind": "failure",
        "step": f.step,
        "item": f.item_index,
        "block": f.block,
        "attempt": f.number,
        "error_class": f.error_class,
        "error_code": f.error_code,
        "error_message": f.error_message,
    }


async def follow(
    source: RunSource, emit: Callable[[Record, RunDetail], None], tick: float = 0.25
) -> RunDetail:
    """Emit every record of the run until it is terminal; return its final detail."""
    queue: list[EngineEvent] = []
    arrived = asyncio.Event()

    async def pump() -> None:
        async for event in source.events():
            queue.append(event)
            arrived.set()

    pumping = asyncio.create_task(pump())
    cursor: str | None = None
    finished_at: float | None = None
    try:
        while True:
            detail = await source.detail()
            if detail is None:
                raise LookupError("the run no longer exists")
            page = await source.logs(cursor)
            cursor = page.next
            events, queue[:] = list(queue), []
            arrived.clear()
            records = [log_record(x) for x in page.items] + [event_record(e) for e in events]
            for record in sorted(records, key=_order):
                emit(record, detail)
            if detail.status in RUN_TERMINAL:
                seen_end = any(e.entity == "run" and e.status in RUN_TERMINAL for e in events)
                finished_at = finished_at or time.monotonic()
                if seen_end or time.monotonic() - finished_at > _FINISH_DEADLINE:
                    for f in await source.failures():
                        emit(failure_record(f), detail)
                    return detail
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(arrived.wait(), tick)
    finally:
        pumping.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pumping


def _order(record: Record) -> tuple[str, int]:
    """By time; at one instant a step's own log (the cause) before transitions (the effect),
    and the run's closing log line last."""
    rank = 1 if record["kind"] != "log" else (0 if record.get("step") else 2)
    return str(record["at"]), rank
