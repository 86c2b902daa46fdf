"""The events facet: run, step and attempt transitions, resumable from a cursor, forever.

One LISTEN connection per engine wakes every subscriber at once (``_Broadcast``); each
subscriber then reads its own page of events below the commit line (see
``store.queries.events``), so a NOTIFY lost or merged costs latency, never an event.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from dirigent.engine.door.paging import MAX_PAGE
from dirigent.engine.door.parts import Parts
from dirigent.engine.shapes.views import EngineEvent, decode_cursor, encode_cursor
from dirigent.engine.store.queries import events


class Events:
    def __init__(self, parts: Parts) -> None:
        self._p = parts
        self._wake = _Broadcast()
        self._listening = False

    @staticmethod
    def beginning() -> str:
        """A subscription cursor before every event: replays a run's story from its start."""
        return encode_cursor(0, 0)

    async def subscribe(
        self,
        *,
        namespace: str | None = None,
        run_id: int | None = None,
        cursor: str | None = None,
        poll: float = 0.5,
    ) -> AsyncIterator[EngineEvent]:
        """Run, step and attempt transitions after ``cursor`` (or from now), forever.

        Resumable: pass the ``cursor`` of the last event handled, and nothing is skipped or
        repeated. Woken by NOTIFY for run and step transitions; ``poll`` bounds how late an
        attempt transition (which sends no NOTIFY) can be seen.
        """
        # "Now" is read before the LISTEN connection opens, not after: what commits while it
        # opens is news, and the first read below finds it.
        if cursor is not None:
            xid, last = decode_cursor(cursor, 2)
            position = (int(xid), int(last))
        else:
            position = await self._p.read(events.latest_position)
        await self._listen()
        while True:
            woken = self._wake.waiter()
            batch = await self._after(position, namespace, run_id)
            for event in batch:
                yield event
            if batch:
                last_key = decode_cursor(batch[-1].cursor, 2)
                position = (int(last_key[0]), int(last_key[1]))
                if len(batch) == MAX_PAGE:
                    continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), poll)

    async def _after(
        self, position: tuple[int, int], namespace: str | None, run_id: int | None
    ) -> list[EngineEvent]:
        return await self._p.read(
            lambda c: events.events_after(
                c, after=position, namespace=namespace, run_id=run_id, limit=MAX_PAGE
            )
        )

    async def _listen(self) -> None:
        if not self._listening:
            self._listening = True
            await self._p.db.listen(events.EVENTS_CHANNEL, self._wake.notify)


class _Broadcast:
    """Wakes every waiting subscriber at once; each wait gets a fresh event."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def waiter(self) -> asyncio.Event:
        return self._event

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()
