"""The firing rules under a clock the test names: misfire grace, windows, DST, backfill slots.

A unit test of ``rules.firing`` itself: it imports the module below the door on purpose.
"""

from __future__ import annotations

import datetime as dt
import itertools
from zoneinfo import ZoneInfo

import pytest

from dirigent.engine.rules.firing import Cadence, decide

UTC = dt.UTC
OSLO = ZoneInfo("Europe/Oslo")
NEW_YORK = ZoneInfo("America/New_York")
H = dt.timedelta(hours=1)
M = dt.timedelta(minutes=1)


def at(y: int, mo: int, d: int, h: int = 0, mi: int = 0, tz: dt.tzinfo = UTC) -> dt.datetime:
    return dt.datetime(y, mo, d, h, mi, tzinfo=tz)


def fire_all(cadence: Cadence, start: dt.datetime, end: dt.datetime) -> list[dt.datetime]:
    """Drive a scheduler clock minute by minute from ``start`` to ``end``: every slot fired."""
    fired: list[dt.datetime] = []
    nxt = cadence.first(start)
    now = start
    while now < end:
        while nxt is not None and nxt <= now:
            f = decide(cadence, nxt, now)
            fired.append(f.scheduled_for)
            nxt = f.next_fire_at
        now += M
    return fired


class TestMisfireGrace:
    cadence = Cadence(cron="*/10 * * * *")

    def test_on_time_keeps_the_grid(self) -> None:
        f = decide(self.cadence, at(2026, 1, 5, 5, 0), at(2026, 1, 5, 5, 0))
        assert not f.misfire
        assert f.next_fire_at == at(2026, 1, 5, 5, 10)
        assert f.lag == dt.timedelta(0)

    def test_late_within_grace_keeps_the_grid(self) -> None:
        f = decide(self.cadence, at(2026, 1, 5, 5, 0), at(2026, 1, 5, 5, 4))
        assert not f.misfire
        assert f.next_fire_at == at(2026, 1, 5, 5, 10)
        assert f.window == (at(2026, 1, 5, 4, 50), at(2026, 1, 5, 5, 0))

    def test_grace_boundary_is_inclusive(self) -> None:
        f = decide(self.cadence, at(2026, 1, 5, 5, 0), at(2026, 1, 5, 5, 5))
        assert not f.misfire

    def test_inside_grace_next_can_be_in_the_past_and_catches_up(self) -> None:
        minutely = Cadence(cron="* * * * *")
        now = at(2026, 1, 5, 5, 3)
        f = decide(minutely, at(2026, 1, 5, 5, 0), now)
        assert not f.misfire and f.next_fire_at == at(2026, 1, 5, 5, 1) < now

    def test_beyond_grace_fires_once_and_continues_from_now(self) -> None:
        # Down over a weekend: one firing, then back on the grid after now.
        owed = at(2026, 1, 2, 5, 0)
        now = at(2026, 1, 5, 7, 33)
        f = decide(Cadence(cron="0 5 * * *"), owed, now)
        assert f.misfire
        assert f.scheduled_for == owed
        assert f.next_fire_at == at(2026, 1, 6, 5, 0)
        # The window is still the owed slot's, not the moment of the tick.
        assert f.window == (at(2026, 1, 1, 5, 0), owed)

    def test_custom_grace(self) -> None:
        f = decide(self.cadence, at(2026, 1, 5, 5, 0), at(2026, 1, 5, 5, 2), grace=M)
        assert f.misfire and f.next_fire_at == at(2026, 1, 5, 5, 10)

    def test_no_catch_up_storm_after_an_outage(self) -> None:
        cadence = Cadence(cron="*/5 * * * *")
        nxt = at(2026, 1, 5, 0, 0)
        now = at(2026, 1, 5, 10, 0) + dt.timedelta(seconds=30)  # 10 h outage
        fired = 0
        while nxt is not None and nxt <= now:
            f = decide(cadence, nxt, now)
            fired += 1
            nxt = f.next_fire_at
        assert fired == 1
        assert nxt == at(2026, 1, 5, 10, 5)

    def test_a_short_outage_of_a_fast_schedule_owes_at_most_catch_up_slots(self) -> None:
        # A 1 s interval, 4 minutes down, inside the 5-minute grace: 240 slots owed.
        every_second = Cadence(interval=dt.timedelta(seconds=1))
        owed = at(2026, 1, 5, 5, 0)
        now = owed + 4 * M
        fired, nxt = 0, owed
        while nxt is not None and nxt <= now:
            f = decide(every_second, nxt, now, catch_up=10)
            fired += 1
            nxt = f.next_fire_at
        assert fired == 1  # the first is already more than 10 behind: fired once, from now
        assert nxt == now + dt.timedelta(seconds=1)

    def test_up_to_catch_up_owed_slots_are_all_fired(self) -> None:
        every_second = Cadence(interval=dt.timedelta(seconds=1))
        owed = at(2026, 1, 5, 5, 0)
        now = owed + dt.timedelta(seconds=9)  # slots 0..9 owed: ten, the bound
        fired = []
        nxt: dt.datetime | None = owed
        while nxt is not None and nxt <= now:
            f = decide(every_second, nxt, now, catch_up=10)
            fired.append((f.scheduled_for, f.misfire))
            nxt = f.next_fire_at
        assert len(fired) == 10 and not any(m for _, m in fired)


class TestInterval:
    cadence = Cadence(interval=dt.timedelta(seconds=90))

    def test_first_is_one_interval_from_now(self) -> None:
        assert self.cadence.first(at(2026, 1, 1)) == at(2026, 1, 1, 0, 1) + dt.timedelta(seconds=30)

    def test_grid_and_window(self) -> None:
        owed = at(2026, 1, 1, 1, 0)
        f = decide(self.cadence, owed, owed + dt.timedelta(seconds=10))
        assert f.next_fire_at == owed + dt.timedelta(seconds=90)
        assert f.window == (owed - dt.timedelta(seconds=90), owed)

    def test_misfire_recomputes_from_now(self) -> None:
        owed = at(2026, 1, 1, 1, 0)
        now = owed + H
        assert decide(self.cadence, owed, now).next_fire_at == now + dt.timedelta(seconds=90)


class TestOneTime:
    def test_fires_once_then_done(self) -> None:
        when = at(2026, 6, 1, 12, 0)
        cadence = Cadence(at=when)
        assert cadence.first(at(2026, 5, 1)) == when
        f = decide(cadence, when, when + dt.timedelta(seconds=3))
        assert f.next_fire_at is None and f.window is None

    def test_past_instant_within_grace_still_fires(self) -> None:
        when = at(2026, 6, 1, 12, 0)
        assert Cadence(at=when).first(when + 2 * M) == when

    def test_past_instant_beyond_grace_has_gone_by(self) -> None:
        when = at(2026, 6, 1, 12, 0)
        assert Cadence(at=when).first(when + H) is None

    def test_no_occurrences(self) -> None:
        with pytest.raises(ValueError, match="one-time"):
            Cadence(at=at(2026, 1, 1)).occurrences(at(2026, 1, 1), at(2026, 2, 1), 200)


class TestDaylightSaving:
    @pytest.mark.parametrize(
        ("tz", "spring", "autumn"),
        [
            (OSLO, (2026, 3, 29), (2026, 10, 25)),
            (NEW_YORK, (2026, 3, 8), (2026, 11, 1)),
        ],
    )
    def test_nightly_window_is_wall_clock(
        self, tz: ZoneInfo, spring: tuple[int, int, int], autumn: tuple[int, int, int]
    ) -> None:
        cadence = Cadence(cron="0 5 * * *", timezone=tz.key)
        start, end = cadence.window(at(*spring, 5, 0, tz=tz).astimezone(UTC)) or (None, None)
        assert start is not None and end is not None
        assert end - start == 23 * H
        assert start.astimezone(tz).hour == 5 and end.astimezone(tz).hour == 5
        start, end = cadence.window(at(*autumn, 5, 0, tz=tz).astimezone(UTC)) or (None, None)
        assert start is not None and end is not None
        assert end - start == 25 * H
        # An ordinary day is 24 hours.
        ordinary = at(2026, 7, 1, 5, 0, tz=tz).astimezone(UTC)
        window = cadence.window(ordinary)
        assert window is not None and window[1] - window[0] == 24 * H

    @pytest.mark.parametrize(("tz", "day"), [(OSLO, (2026, 3, 29)), (NEW_YORK, (2026, 3, 8))])
    def test_spring_forward_0230_fires_once(self, tz: ZoneInfo, day: tuple[int, int, int]) -> None:
        cadence = Cadence(cron="30 2 * * *", timezone=tz.key)
        y, m, d = day
        fired = fire_all(
            cadence, at(y, m, d - 1, 12, 0, tz=tz).astimezone(UTC), at(y, m, d + 1, 12, 0, tz=tz)
        )
        on_day = [f for f in fired if f.astimezone(tz).date() == dt.date(y, m, d)]
        assert len(on_day) == 1
        assert len(fired) == 2  # the day before and the spring-forward day, nothing doubled

    @pytest.mark.parametrize(("tz", "day"), [(OSLO, (2026, 10, 25)), (NEW_YORK, (2026, 11, 1))])
    def test_fall_back_ambiguous_time_fires_once(
        self, tz: ZoneInfo, day: tuple[int, int, int]
    ) -> None:
        # 02:30 (Oslo) and 01:30 (New York) happen twice on the fall-back morning.
        hour = 2 if tz is OSLO else 1
        cadence = Cadence(cron=f"30 {hour} * * *", timezone=tz.key)
        y, m, d = day
        noon = at(y, m, d, 12, 0, tz=tz)
        fired = fire_all(cadence, (noon - 24 * H).astimezone(UTC), noon)
        assert len(fired) == 1
        assert fired[0].astimezone(tz).date() == dt.date(y, m, d)

    def test_hourly_cron_across_fall_back_keeps_every_real_hour(self) -> None:
        cadence = Cadence(cron="0 * * * *", timezone="Europe/Oslo")
        fired = fire_all(cadence, at(2026, 10, 24, 22, 0), at(2026, 10, 25, 4, 0))
        # 22:00Z..03:00Z: six real hours, each fired exactly once; the slots are an hour apart.
        assert len(fired) == len(set(fired))
        assert all(b - a == H for a, b in itertools.pairwise(fired))


class TestBackfillSlots:
    def test_half_open_and_tiling(self) -> None:
        cadence = Cadence(cron="0 * * * *")
        first = cadence.occurrences(at(2026, 1, 1, 0), at(2026, 1, 1, 3), 200)
        second = cadence.occurrences(at(2026, 1, 1, 3), at(2026, 1, 1, 6), 200)
        assert first == [at(2026, 1, 1, h) for h in (0, 1, 2)]
        assert second == [at(2026, 1, 1, h) for h in (3, 4, 5)]

    def test_interval_is_anchored_on_from(self) -> None:
        cadence = Cadence(interval=dt.timedelta(minutes=25))
        slots = cadence.occurrences(at(2026, 1, 1, 0, 7), at(2026, 1, 1, 1, 0), 200)
        assert slots == [at(2026, 1, 1, 0, 7), at(2026, 1, 1, 0, 32), at(2026, 1, 1, 0, 57)]

    def test_stops_one_past_the_limit(self) -> None:
        cadence = Cadence(cron="* * * * *")
        assert len(cadence.occurrences(at(2026, 1, 1), at(2027, 1, 1), 200)) == 201
