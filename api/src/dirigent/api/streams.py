"""Server-sent event streams: a run's whole story (``$events``) and its log (``$logs``).

``$events`` merges two sources into one stream per run: the engine's transitions of the run,
its steps and its attempts (``Engine.subscribe`` by durable cursor, woken by NOTIFY) and its
log lines (a page read by id each cycle — log rows are written by whichever worker ran the
attempt, so there is nothing to subscribe to). Every frame carries an SSE ``id`` naming the
position after it in *both* sources; a client that reconnects with ``Last-Event-ID`` resumes
exactly there, so across a reconnect nothing is lost and nothing is repeated. Without one the
stream starts at the run's beginning, so a late joiner reads the same story.

The stream ends with an ``end`` frame once the run has finished and everything up to its last
event and its last log line has been sent, or with ``expired`` when the server's stream
lifetime runs out first (reopen from the last id; it is not the end of the story), or with
``end`` and a ``reason`` when the access that opened it is gone: the token and the permission
are checked again every ``recheck`` seconds, so a revoked RoleBinding or an expired token
closes the stream within about a minute rather than when its lifetime ends. Each
cycle's frames are ordered by time, a transition ahead of a log line written at the same
instant; within each source the order is the source's own.

Followers of one run in one process share one reading of it (``dirigent.api.feeds``): one
subscription and one log poll per run however many clients follow it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel

from dirigent.api.feeds import Entry, Position, RunFeeds
from dirigent.engine.shapes.views import encode_cursor

__all__ = ["Position", "RunFeeds", "StreamSettings", "follow_logs", "frame", "run_events"]

KEEPALIVE_SECONDS = 15.0


# Asked every ``StreamSettings.recheck`` seconds: None while the stream's principal may still
# read it, else the reason it may not (said in the closing ``end`` frame).
Access = Callable[[], Awaitable[str | None]]


@dataclass(frozen=True)
class StreamSettings:
    poll: float = 0.5
    lifetime: float = 3600.0
    recheck: float = 60.0


def frame(event: str, data: BaseModel | dict[str, Any], event_id: str | None = None) -> bytes:
    body = data.model_dump_json() if isinstance(data, BaseModel) else json.dumps(data)
    return _frame(event, body, event_id)


async def run_events(
    feeds: RunFeeds,
    namespace: str,
    run_id: int,
    start: Position,
    settings: StreamSettings,
    access: Access | None = None,
) -> AsyncGenerator[bytes, None]:
    """The ``$events`` frames of one run after ``start``, read from the run's shared feed."""
    frames = _follow(feeds, namespace, run_id, start, settings, logs_only=False, access=access)
    async for chunk in frames:
        yield chunk


async def follow_logs(
    feeds: RunFeeds,
    namespace: str,
    run_id: int,
    after: int,
    settings: StreamSettings,
    access: Access | None = None,
) -> AsyncGenerator[bytes, None]:
    """``$logs?follow=sse``: every line after log ``after`` as it is written (ids are log
    cursors), ``end`` once the run finished and its last line went out; from the shared feed."""
    start = Position(log=after)
    frames = _follow(feeds, namespace, run_id, start, settings, logs_only=True, access=access)
    async for chunk in frames:
        yield chunk


async def _follow(
    feeds: RunFeeds,
    namespace: str,
    run_id: int,
    start: Position,
    settings: StreamSettings,
    *,
    logs_only: bool,
    access: Access | None = None,
) -> AsyncGenerator[bytes, None]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.lifetime
    recheck_at = loop.time() + settings.recheck
    last_sent = loop.time()
    position = replace(start)

    def ident() -> str | None:
        if logs_only:
            return encode_cursor(position.log) if position.log else None
        return position.id()

    async with feeds.reading(namespace, run_id, start) as feed:
        index = 0
        while True:
            # Everything the feed holds past this reader goes out as one chunk: one write
            # per wake-up rather than one per frame.
            chunk: list[bytes] = []
            while index < len(feed.entries):
                entry = feed.entries[index]
                index += 1
                if entry.event == "end":
                    end = {"run_id": run_id, "status": entry.body}
                    yield b"".join([*chunk, frame("end", end, ident())])
                    return
                if (entry.log_id is not None or not logs_only) and _advance(position, entry):
                    chunk.append(_frame(entry.event, entry.body, ident()))
            if chunk:
                yield b"".join(chunk)
                last_sent = loop.time()
            if feed.failure is not None:
                raise feed.failure
            if loop.time() >= deadline:
                yield frame("expired", _expired(run_id), ident())
                return
            if access is not None and loop.time() >= recheck_at:
                reason = await _still_allowed(access)
                if reason is not None:
                    yield frame("end", {"run_id": run_id, "reason": reason}, ident())
                    return
                recheck_at = loop.time() + settings.recheck
            quiet = loop.time() - last_sent
            bound = min(KEEPALIVE_SECONDS - quiet, deadline - loop.time())
            if access is not None:
                bound = min(bound, recheck_at - loop.time())
            await feed.wait(index, max(bound, 0.0))
            if loop.time() - last_sent >= KEEPALIVE_SECONDS:
                last_sent = loop.time()
                yield b": keepalive\n\n"


async def _still_allowed(access: Access) -> str | None:
    """The access check, failing closed: a check that cannot be made ends the stream."""
    try:
        return await access()
    except Exception as err:  # the cluster did not answer: say so, never keep streaming
        return f"access could not be checked again ({type(err).__name__}); reconnect"


def _advance(position: Position, entry: Entry) -> bool:
    """Move ``position`` past ``entry``; False when the reader had already seen it."""
    if entry.event_key is not None:
        if entry.event_key <= position.key():
            return False
        position.xid, position.event = entry.event_key
        return True
    assert entry.log_id is not None
    if entry.log_id <= position.log:
        return False
    position.log = entry.log_id
    return True


def _frame(event: str, body: str, event_id: str | None) -> bytes:
    head = f"event: {event}\n" + (f"id: {event_id}\n" if event_id else "")
    return f"{head}data: {body}\n\n".encode()


def _expired(run_id: int) -> dict[str, Any]:
    return {"run_id": run_id, "reason": "stream lifetime reached; reconnect with Last-Event-ID"}
