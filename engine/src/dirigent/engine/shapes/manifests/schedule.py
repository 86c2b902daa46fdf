"""The Schedule manifest: when a pipeline runs by the clock.

Exactly one of ``cron`` / ``interval`` / ``at``; cron expressions are evaluated by cronsim
in the schedule's own IANA timezone, never the machine's.
"""

from __future__ import annotations

import zoneinfo
from datetime import datetime
from typing import Literal, Self

from cronsim import CronSim, CronSimError
from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from dirigent.engine.shapes.manifests.base import Model, ObjectMeta, OpaqueMap
from dirigent.engine.shapes.manifests.enums import Priority
from dirigent.sdk.names import EntityName
from dirigent.sdk.units import Duration


def check_cron(expr: str) -> str | None:
    """None when the expression is valid, else why not.

    Five fields only: cronsim also reads a leading seconds field, which would let a schedule
    fire every second and makes "0 0 5 * * *" mean something else than a reader expects.
    """
    if len(expr.split()) != 5:
        return f"{len(expr.split())} fields where cron has five (minute hour day month weekday)"
    try:
        CronSim(expr, datetime(2000, 1, 1))
    except CronSimError as err:
        return str(err)
    return None


def check_timezone(name: str) -> bool:
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return True


class ScheduleSpec(Model):
    pipeline: EntityName = Field(description="A Pipeline in the same namespace.")
    cron: str | None = Field(default=None, description="A cron expression, e.g. '0 5 * * *'.")
    interval: Duration | None = None
    at: datetime | None = Field(default=None, description="A one-time instant (RFC 3339).")
    timezone: str = Field(default="UTC", description="An IANA timezone, e.g. Europe/Oslo.")
    params: OpaqueMap = Field(default_factory=dict)
    priority: Priority | None = None
    paused: bool = False

    @field_validator("cron")
    @classmethod
    def _cron_parses(cls, expr: str | None) -> str | None:
        if expr is not None and (why := check_cron(expr)) is not None:
            raise PydanticCustomError(
                "schedule.cron.invalid",
                "'{expr}' is not a cron expression ({why}); write five fields such as '0 5 * * *'",
                {"expr": expr, "why": why},
            )
        return expr

    @field_validator("timezone")
    @classmethod
    def _timezone_exists(cls, name: str) -> str:
        if not check_timezone(name):
            raise PydanticCustomError(
                "schedule.timezone.unknown",
                "'{tz}' is not an IANA timezone; write one such as Europe/Oslo or UTC",
                {"tz": name},
            )
        return name

    @field_validator("interval")
    @classmethod
    def _interval_positive(cls, value: Duration | None) -> Duration | None:
        if value is not None and value.milliseconds < 1000:
            raise PydanticCustomError(
                "schedule.interval.too_short",
                "an interval must be at least 1s, got {v}",
                {"v": str(value)},
            )
        return value

    @model_validator(mode="after")
    def _exactly_one_clock(self) -> Self:
        given = [n for n in ("cron", "interval", "at") if getattr(self, n) is not None]
        if len(given) != 1:
            raise PydanticCustomError(
                "schedule.clock.exactly_one",
                "a schedule needs exactly one of cron, interval or at; got {given}",
                {"given": ", ".join(given) or "none"},
            )
        return self


class Schedule(Model):
    """A Schedule resource: fires its pipeline on a cron, an interval, or once."""

    api_version: Literal["dirigent.dev/v1alpha1"]
    kind: Literal["Schedule"]
    metadata: ObjectMeta
    spec: ScheduleSpec
