"""One shared engine feed per followed run: one subscription and one log poll, many readers.

A ``$events`` follower used to run its own engine subscription and its own log poll, so a
hundred followers of one run cost a hundred event queries per wake-up and a hundred log
queries per poll interval, and fell far behind the run. Here the first follower of a run
starts a ``RunFeed``: a task that reads the run's transitions and log lines once, merges them
in the stream's order (see ``dirigent.api.streams``) and appends each to a list, the body
already encoded. Every follower in the process reads that list by index and writes its own
SSE ids, so a follower costs a list walk, not queries. The feed stops when its last follower
leaves or after the run's ``end``; a follower whose ``Last-Event-ID`` lies before the shared
feed's start gets a feed of its own from its position, so resuming never loses or repeats.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

import anyio

from dirigent.api.problems import ApiProblem
from dirigent.engine import Engine
from dirigent.engine.shapes.problems import ProblemsError
from dirigent.engine.shapes.statuses import RUN_TERMINAL
from dirigent.engine.shapes.views import EngineEvent, LogView, decode_cursor, encode_cursor

LOG_PAGE = 500


@dataclass
class Position:
    """Where a reader of a run's story is: after event ``(xid, event)`` and log line ``log``."""

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

    def key(self) -> tuple[int, int]:
        return (self.xid, self.event)

    def id(self) -> str:
        return encode_cursor(self.xid, self.event, self.log)

    def covers(self, other: Position) -> bool:
        """True when nothing after ``other`` lies before this position in either source."""
        return self.key() <= other.key() and self.log <= other.log


@dataclass(frozen=True)
class Entry:
    """One frame of the story: its SSE event name, its encoded body and its place in its source.

    ``event_key`` is set for a transition, ``log_id`` for a log line; the ``end`` entry has
    neither and carries the run's final status in ``body``.
    """

    event: str
    body: str
    event_key: tuple[int, int] | None = None
    log_id: int | None = None


@dataclass
class RunFeed:
    """The story of one run from ``start``, appended as it is read; readers wait on ``changed``."""

    engine: Engine
    namespace: str
    run_id: int
    start: Position
    poll: float
    entries: list[Entry] = field(default_factory=list)
    failure: BaseException | None = None
    finished: bool = False
    readers: int = 0
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None

    def begin(self) -> None:
        self._task = asyncio.create_task(self._produce())

    async def wait(self, known: int, seconds: float) -> None:
        """Return once there are more than ``known`` entries, the feed stopped, or ``seconds``."""
        if len(self.entries) > known or self.finished:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._changed.wait()

    async def stop(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        # Shielded: a client that left cancels its response's scope, which would cancel this
        # wait too; the subscription has really stopped when this returns.
        with anyio.CancelScope(shield=True), contextlib.suppress(asyncio.CancelledError):
            await self._task

    def _publish(self, entries: list[Entry]) -> None:
        self.entries.extend(entries)
        self._changed.set()
        self._changed = asyncio.Event()

    async def _produce(self) -> None:
        try:
            await self._read()
        except asyncio.CancelledError:
            raise
        except Exception as error:  # handed to every reader, which raises it
            self.failure = error
        finally:
            self.finished = True
            self._publish([])

    async def _read(self) -> None:
        engine, ns, run_id = self.engine, self.namespace, self.run_id
        end = await _end_key(engine, ns, run_id)
        key, log = self.start.key(), self.start.log
        async with _subscription(engine, run_id, self.start, self.poll) as queue:
            # Let the subscription's first batch arrive before the first log page is read, so
            # a reader who joins reads the run's transitions ahead of the lines they caused.
            pending = await _next(queue, self.poll * 2)
            while True:
                events, pending = pending + _drain(queue), []
                cursor = encode_log(log)
                page = await engine.runs.logs(ns, run_id, cursor=cursor, limit=LOG_PAGE)
                batch: list[Entry] = []
                for item in merged(events, page.items):
                    if isinstance(item, EngineEvent):
                        xid, event = decode_cursor(item.cursor, 2)
                        key = (int(xid), int(event))
                        if item.entity == "run" and item.status in RUN_TERMINAL:
                            end = await _end_key(engine, ns, run_id)
                        batch.append(Entry(item.entity, item.model_dump_json(), event_key=key))
                    else:
                        log = item.id
                        batch.append(Entry("log", item.model_dump_json(), log_id=item.id))
                self._publish(batch)
                if len(page.items) == LOG_PAGE or not queue.empty():
                    continue
                if end is not None and key >= end:
                    status = await engine.runs.status(ns, run_id) or "unknown"
                    self._publish([Entry("end", status)])
                    return
                pending = await _next(queue, self.poll)


class RunFeeds:
    """The process's feeds, one per followed run; shared by every reader of that run."""

    def __init__(self, engine: Engine, poll: float) -> None:
        self._engine = engine
        self._poll = poll
        self._feeds: dict[tuple[str, int], RunFeed] = {}

    def __len__(self) -> int:
        return len(self._feeds)

    @contextlib.asynccontextmanager
    async def reading(self, namespace: str, run_id: int, start: Position) -> AsyncIterator[RunFeed]:
        """The run's shared feed (started on first use) or, when ``start`` lies before the
        shared feed's start, a feed of the reader's own; released when the reader leaves."""
        run = (namespace, run_id)
        shared = self._feeds.get(run)
        if shared is not None and shared.failure is None and shared.start.covers(start):
            feed = shared
        else:
            feed = self._new(namespace, run_id, replace(start))
            if shared is None:
                self._feeds[run] = feed
        feed.readers += 1
        try:
            yield feed
        finally:
            feed.readers -= 1
            if feed.readers == 0:
                if self._feeds.get(run) is feed:
                    del self._feeds[run]
                await feed.stop()

    def _new(self, namespace: str, run_id: int, start: Position) -> RunFeed:
        feed = RunFeed(self._engine, namespace, run_id, start, self._poll)
        feed.begin()
        return feed


def encode_log(log: int) -> str | None:
    return encode_cursor(log) if log else None


def merged(events: list[EngineEvent], logs: list[LogView]) -> list[EngineEvent | LogView]:
    """One cycle's frames by time, a transition ahead of a line of the same instant.

    Each source then refills the slots the time sort gave it in its own order, so the
    resume position of each source only ever moves forward within the stream.
    """
    tagged: list[tuple[Any, int, int, EngineEvent | LogView]] = [
        (e.at, 0, i, e) for i, e in enumerate(events)
    ]
    tagged += [(line.created_at, 1, i, line) for i, line in enumerate(logs)]
    tagged.sort(key=lambda t: (t[0], t[1], t[2]))
    ev, lg = iter(events), iter(logs)
    return [next(ev) if isinstance(t[3], EngineEvent) else next(lg) for t in tagged]


@contextlib.asynccontextmanager
async def _subscription(
    engine: Engine, run_id: int, start: Position, poll: float
) -> AsyncGenerator[asyncio.Queue[EngineEvent], None]:
    queue: asyncio.Queue[EngineEvent] = asyncio.Queue()

    async def pump() -> None:
        cursor = encode_cursor(*start.key())
        async for event in engine.events.subscribe(run_id=run_id, cursor=cursor, poll=poll):
            queue.put_nowait(event)

    task = asyncio.create_task(pump())
    try:
        yield queue
    finally:
        task.cancel()
        with anyio.CancelScope(shield=True), contextlib.suppress(asyncio.CancelledError):
            await task


async def _next(queue: asyncio.Queue[EngineEvent], seconds: float) -> list[EngineEvent]:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            return [await queue.get()]
    return []


def _drain(queue: asyncio.Queue[EngineEvent]) -> list[EngineEvent]:
    out: list[EngineEvent] = []
    while not queue.empty():
        out.append(queue.get_nowait())
    return out


async def _end_key(engine: Engine, namespace: str, run_id: int) -> tuple[int, int] | None:
    cursor = await engine.runs.end_cursor(namespace, run_id)
    if cursor is None:
        return None
    xid, event = decode_cursor(cursor, 2)
    return int(xid), int(event)
