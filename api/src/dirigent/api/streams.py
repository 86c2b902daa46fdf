"""Server-sent event streams: a run's whole story (``$events``) and its log (``$logs``).

``$events`` merges two sources into one stream per run: the engine's transitions of the run,
its steps and its attempts (``Engine.subscribe`` by durable cursor, woken by NOTIFY) and its
log lines (a page read by id each cycle — log rows are written by whichever worker ran the
attempt, so there is nothing to subscribe to). Every frame carries an SSE ``id`` naming the
position after it in *both* sources; a client that reconnects with ``Last-Event-ID`` resumes
exactly there, so across a reconnect nothing is lost and nothing is repeated. Without one the
stream starts at the run's beginning, so a late joiner reads the same story.

The stream ends with an ``end`` frame once the run has settled and everything up to its last
event and its last log line has been sent, or with ``expired`` when the server's stream
lifetime runs out first (reopen from the last id; it is not the end of the story). Each
cycle's frames are ordered by time, a transition ahead of a log line written at the same
instant; within each source the order is the source's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import anyio
from pydantic import BaseModel

from dirigent.api.problems import ApiProblem
from dirigent.engine import Engine
from dirigent.engine.problems import ProblemsError
from dirigent.engine.views import EngineEvent, LogView, decode_cursor, encode_cursor

LOG_PAGE = 500
KEEPALIVE_SECONDS = 15.0
TERMINAL = frozenset({"succeeded", "completed_with_errors", "failed", "cancelled"})


@dataclass(frozen=True)
class StreamSettings:
    poll: float = 0.5
    lifetime: float = 3600.0


def frame(event: str, data: BaseModel | dict[str, Any], event_id: str | None = None) -> bytes:
    body = data.model_dump_json() if isinstance(data, BaseModel) else json.dumps(data)
    head = f"event: {event}\n" + (f"id: {event_id}\n" if event_id else "")
    return f"{head}data: {body}\n\n".encode()


@dataclass
class Position:
    """Where a ``$events`` client is: after event ``(xid, id)`` and after log line ``log``."""

    xid: int = 0
    event: int = 0
    log: int = 0

    @classmethod
    def parse(cls, last_event_id: str | None) -> Position:
        if not last_event_id:
            return cls()
        try:
            xid, event, log = (int(x) for x in decode_cursor(last_event_id, 3))
        except (ProblemsError, TypeError, ValueError):
            raise ApiProblem(
                422,
                "stream.cursor.invalid",
                "Last-Event-ID is not an id this stream sent; reconnect without it",
            ) from None
        return cls(xid, event, log)

    @property
    def event_cursor(self) -> str:
        return encode_cursor(self.xid, self.event)

    @property
    def log_cursor(self) -> str | None:
        return encode_cursor(self.log) if self.log else None

    def key(self) -> tuple[int, int]:
        return (self.xid, self.event)

    def id(self) -> str:
        return encode_cursor(self.xid, self.event, self.log)


async def run_events(
    engine: Engine, namespace: str, run_id: int, start: Position, settings: StreamSettings
) -> AsyncGenerator[bytes, None]:
    """The ``$events`` frames of one run from ``start``; see the module docstring."""
    end = await _end_key(engine, namespace, run_id)
    position, pending = start, list[EngineEvent]()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.lifetime
    last_sent = loop.time()
    queue: asyncio.Queue[EngineEvent] = asyncio.Queue()
    # No await between creating the pump and entering the try: its finally must stop it.
    pump = asyncio.create_task(_pump(engine, run_id, start.event_cursor, settings.poll, queue))
    try:
        # Let the subscription's first batch arrive before the first log page is read, so a
        # client that joins reads the run's transitions ahead of the lines they caused.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(settings.poll * 2):
                pending.append(await queue.get())
        while True:
            events, pending = pending + _drain(queue), []
            page = await engine.logs(namespace, run_id, cursor=position.log_cursor, limit=LOG_PAGE)
            for item in _merged(events, page.items):
                if isinstance(item, EngineEvent):
                    xid, event = decode_cursor(item.cursor, 2)
                    position.xid, position.event = int(xid), int(event)
                    if item.entity == "run" and item.status in TERMINAL:
                        end = await _end_key(engine, namespace, run_id)
                    yield frame(item.entity, item, position.id())
                else:
                    position.log = item.id
                    yield frame("log", item, position.id())
                last_sent = loop.time()
            if len(page.items) == LOG_PAGE or not queue.empty():
                continue
            if end is not None and position.key() >= end:
                status = await _status(engine, namespace, run_id)
                yield frame("end", {"run_id": run_id, "status": status}, position.id())
                return
            if loop.time() >= deadline:
                yield frame("expired", _expired(run_id), position.id())
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(settings.poll):
                    pending.append(await queue.get())
            if loop.time() - last_sent >= KEEPALIVE_SECONDS:
                last_sent = loop.time()
                yield b": keepalive\n\n"
    finally:
        # A client that left cancels the response's anyio scope, which would cancel this
        # wait too; shielded, the subscription has really stopped when the stream ends.
        pump.cancel()
        with anyio.CancelScope(shield=True), contextlib.suppress(asyncio.CancelledError):
            await pump


async def follow_logs(
    engine: Engine,
    namespace: str,
    run_id: int,
    cursor: str | None,
    settings: StreamSettings,
) -> AsyncGenerator[bytes, None]:
    """``$logs?follow=sse``: every line after ``cursor`` as it is written; ``end`` once settled."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.lifetime
    quiet_since = loop.time()
    while True:
        status = await _status(engine, namespace, run_id)
        page = await engine.logs(namespace, run_id, cursor=cursor, limit=LOG_PAGE)
        for line in page.items:
            cursor = encode_cursor(line.id)
            yield frame("log", line, cursor)
        if page.items:
            quiet_since = loop.time()
        if len(page.items) == LOG_PAGE:
            continue
        if status in TERMINAL:
            yield frame("end", {"run_id": run_id, "status": status}, cursor)
            return
        if loop.time() >= deadline:
            yield frame("expired", _expired(run_id), cursor)
            return
        if loop.time() - quiet_since >= KEEPALIVE_SECONDS:
            quiet_since = loop.time()
            yield b": keepalive\n\n"
        await asyncio.sleep(settings.poll)  # the poll interval: logs have no notification


async def _pump(
    engine: Engine, run_id: int, cursor: str, poll: float, queue: asyncio.Queue[EngineEvent]
) -> None:
    async for event in engine.subscribe(run_id=run_id, cursor=cursor, poll=poll):
        queue.put_nowait(event)


def _drain(queue: asyncio.Queue[EngineEvent]) -> list[EngineEvent]:
    out: list[EngineEvent] = []
    while not queue.empty():
        out.append(queue.get_nowait())
    return out


def _expired(run_id: int) -> dict[str, Any]:
    return {"run_id": run_id, "reason": "stream lifetime reached; reconnect with Last-Event-ID"}


def _merged(events: list[EngineEvent], logs: list[LogView]) -> list[EngineEvent | LogView]:
    """One cycle's frames by time, a transition ahead of a line of the same instant.

    Each source then refills the slots the time sort gave it in its own order, so the
    resume position of each source only ever moves forward within the stream.
    """
    tagged: list[tuple[datetime, int, int, EngineEvent | LogView]] = [
        (e.at, 0, i, e) for i, e in enumerate(events)
    ]
    tagged += [(line.created_at, 1, i, line) for i, line in enumerate(logs)]
    tagged.sort(key=lambda t: (t[0], t[1], t[2]))
    ev, lg = iter(events), iter(logs)
    return [next(ev) if isinstance(t[3], EngineEvent) else next(lg) for t in tagged]


async def _end_key(engine: Engine, namespace: str, run_id: int) -> tuple[int, int] | None:
    cursor = await engine.run_end_cursor(namespace, run_id)
    if cursor is None:
        return None
    xid, event = decode_cursor(cursor, 2)
    return int(xid), int(event)


async def _status(engine: Engine, namespace: str, run_id: int) -> str:
    return await engine.run_status(namespace, run_id) or "unknown"
