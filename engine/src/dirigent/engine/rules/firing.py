"""When a schedule fires, and what window a firing covers: pure rules over a given ``now``.

Nothing here reads a clock or a database, so the misfire grace, the windows and daylight
saving are tested with whatever instant a test names. Cron runs through cronsim in the
schedule's own IANA timezone, forwards for the next slot and backwards for a window's start,
so a window is wall-clock: a nightly Europe/Oslo window is 23 h on the spring-forward day
and 25 h in autumn, and a 02:30 cron fires once on both days (cronsim moves a slot that does
not exist to the next valid instant and fires an ambiguous one at its first occurrence).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from cronsim import CronSim

DEFAULT_GRACE = dt.timedelta(minutes=5)
# Slots one schedule may owe before the rest count as a misfire (fired once, from now).
DEFAULT_CATCH_UP = 10
MAX_BACKFILL = 200


@dataclass(frozen=True)
class Cadence:
    """Exactly one of ``cron``, ``interval`` or ``at``, read in ``timezone``."""

    cron: str | None = None
    interval: dt.timedelta | None = None
    at: dt.datetime | None = None
    timezone: str = "UTC"

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @property
    def one_time(self) -> bool:
        return self.at is not None

    def next_after(self, instant: dt.datetime) -> dt.datetime | None:
        """The first slot strictly after ``instant``; None for a one-time schedule."""
        if self.cron is not None:
            return _utc(next(CronSim(self.cron, instant.astimezone(self.zone))))
        if self.interval is not None:
            return instant + self.interval
        return None

    def previous_before(self, instant: dt.datetime) -> dt.datetime | None:
        """The slot before ``instant`` on the same grid; None for a one-time schedule."""
        if self.cron is not None:
            it = CronSim(self.cron, instant.astimezone(self.zone), reverse=True)
            return _utc(next(it))
        if self.interval is not None:
            return instant - self.interval
        return None

    def first(self, now: dt.datetime, grace: dt.timedelta = DEFAULT_GRACE) -> dt.datetime | None:
        """The first firing of a schedule created (or resumed) at ``now``.

        A one-time instant further in the past than the grace has gone by: no firing.
        """
        if self.at is not None:
            return self.at if self.at >= now - grace else None
        return self.next_after(now)

    def window(self, scheduled_for: dt.datetime) -> tuple[dt.datetime, dt.datetime] | None:
        """``[previous slot, scheduled_for)``; a one-time schedule has no cadence, no window."""
        start = self.previous_before(scheduled_for)
        return None if start is None else (start, scheduled_for)

    def occurrences(self, start: dt.datetime, end: dt.datetime, limit: int) -> list[dt.datetime]:
        """Slots in ``[start, end)``, at most ``limit + 1`` (so a caller can tell it overflowed).

        An interval has no absolute grid, so its slots are anchored on ``start``.
        """
        if self.at is not None:
            raise ValueError("a one-time schedule has no cadence to enumerate")
        out: list[dt.datetime] = []
        slot: dt.datetime | None
        if self.cron is not None:
            slot = self.next_after(start - dt.timedelta(microseconds=1))
        else:
            slot = start
        while slot is not None and slot < end and len(out) <= limit:
            out.append(slot)
            slot = self.next_after(slot)
        return out


@dataclass(frozen=True)
class Firing:
    """What a tick decides for one due schedule."""

    scheduled_for: dt.datetime
    misfire: bool  # later than the grace: fires once, the next slot is computed from now
    next_fire_at: dt.datetime | None  # None: a one-time schedule is done
    window: tuple[dt.datetime, dt.datetime] | None
    lag: dt.timedelta


def decide(
    cadence: Cadence,
    scheduled_for: dt.datetime,
    now: dt.datetime,
    grace: dt.timedelta = DEFAULT_GRACE,
    catch_up: int = DEFAULT_CATCH_UP,
) -> Firing:
    """Fire the slot owed at ``scheduled_for`` (which is ``<= now``) and say what comes next.

    Late by at most the grace keeps the grid (the next slot follows the one owed, so it may
    still be in the past and is caught up tick by tick); later than that is a misfire: fire
    once and continue from now, abandoning every missed slot (no catch-up storm). More than
    ``catch_up`` slots owed is a misfire too, however short the outage: a 1 s interval
    schedule back from a 4-minute outage inside a 5-minute grace owed 240 runs at once.
    """
    lag = now - scheduled_for
    misfire = lag > grace or _owed_beyond(cadence, scheduled_for, now, catch_up)
    following = cadence.next_after(now if misfire else scheduled_for)
    return Firing(scheduled_for, misfire, following, cadence.window(scheduled_for), lag)


def _owed_beyond(
    cadence: Cadence, scheduled_for: dt.datetime, now: dt.datetime, catch_up: int
) -> bool:
    """Whether more than ``catch_up`` slots are owed at ``now`` (counting stops there)."""
    slot, owed = scheduled_for, 1
    while owed <= catch_up:
        following = cadence.next_after(slot)
        if following is None or following > now:
            return False
        slot, owed = following, owed + 1
    return True


def _utc(value: dt.datetime) -> dt.datetime:
    return value.astimezone(dt.UTC)
