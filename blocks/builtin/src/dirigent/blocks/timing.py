"""``time.window``: a sensor that holds until a wall-clock window opens, in a timezone.

Why wall-clock in a zone: "between 02:00 and 05:00 Europe/Oslo" means local time, which
moves against UTC twice a year. The window is computed from the local date with
``zoneinfo``, so it is DST-correct: on the spring-forward day a start inside the skipped
hour moves forward by the gap (02:30 opens at 03:30), and on the fall-back day the first
occurrence is used. A window whose end is before its start spans midnight.
"""

from __future__ import annotations

import datetime as dt
from typing import ClassVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, Field

from dirigent.blocks.base import Config, Output, has_reference
from dirigent.sdk import Duration, Issue, Message, NotYet, Sensor, SensorSpec, StepContext

__all__ = ["TimeWindowSensor", "window_state"]

ZONE_UNKNOWN = Message("time.zone.unknown", "'{zone}' is not a known timezone (e.g. Europe/Oslo)")
DAYS_UNKNOWN = Message("time.days.unknown", "unknown weekday(s) {days}; use mon..sun")
DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


class WindowConfig(Config):
    start: dt.time = Field(description="Local time the window opens, e.g. '02:00'.")
    end: dt.time | None = Field(default=None, description="Local time it closes; none: open.")
    timezone: str = Field(default="UTC", description="IANA zone, e.g. 'Europe/Oslo'.")
    days: list[str] = Field(
        default_factory=lambda: list(DAYS), description="Weekdays (local) it opens on: mon..sun."
    )


class WindowOutput(Output):
    opened_at: dt.datetime = Field(description="When this window opened (UTC).")
    closes_at: dt.datetime | None = None


def _local(day: dt.date, at: dt.time, zone: ZoneInfo) -> dt.datetime:
    """``day at`` in ``zone`` as an aware UTC instant.

    ``fold=0`` (PEP 495) is the whole rule: a local time skipped by spring-forward is read
    with the offset before the change, i.e. moved forward by the gap (02:30 -> 03:30), and
    a local time repeated by fall-back is its first occurrence.
    """
    return dt.datetime.combine(day, at).replace(tzinfo=zone, fold=0).astimezone(dt.UTC)


def window_state(
    config: WindowConfig, now: dt.datetime
) -> tuple[dt.datetime | None, dt.datetime | None, dt.datetime]:
    """(opened_at, closes_at) of the window open at ``now``, else (None, None, next open)."""
    zone = ZoneInfo(config.timezone)
    today = now.astimezone(zone).date()
    next_open: dt.datetime | None = None
    for offset in range(-1, 9):
        day = today + dt.timedelta(days=offset)
        if DAYS[day.weekday()] not in config.days:
            continue
        opens = _local(day, config.start, zone)
        closes = None
        if config.end is not None:
            end_day = day if config.end > config.start else day + dt.timedelta(days=1)
            closes = _local(end_day, config.end, zone)
        if opens <= now and (closes is None or now < closes):
            return opens, closes, opens
        if opens > now and next_open is None:
            next_open = opens
    assert next_open is not None or not config.days
    return None, None, next_open or now


class TimeWindowSensor(Sensor[WindowConfig, WindowOutput]):
    """Waits until a wall-clock window is open in a timezone (DST-correct)."""

    spec: ClassVar[SensorSpec] = SensorSpec(
        id="time.window",
        summary="Wait until a wall-clock window opens, in a timezone.",
        default_poll=Duration.of(seconds=30),
        default_deadline=Duration.of(days=8),
    )
    config_model: ClassVar[type[BaseModel]] = WindowConfig
    output_model: ClassVar[type[BaseModel]] = WindowOutput

    def check_config(self, config: WindowConfig) -> list[Issue]:
        issues: list[Issue] = []
        if not has_reference(config.timezone):
            try:
                ZoneInfo(config.timezone)
            except (ZoneInfoNotFoundError, ValueError):
                issues.append(Issue.of(ZONE_UNKNOWN, location=("timezone",), zone=config.timezone))
        bad = [d for d in config.days if d not in DAYS]
        if bad:
            issues.append(Issue.of(DAYS_UNKNOWN, location=("days",), days=bad))
        return issues

    async def poke(self, config: WindowConfig, ctx: StepContext) -> WindowOutput | NotYet:
        opened, closes, next_open = window_state(config, dt.datetime.now(dt.UTC))
        if opened is not None:
            return WindowOutput(opened_at=opened, closes_at=closes)
        return NotYet(message=f"waiting for the window opening {next_open.isoformat()}")
