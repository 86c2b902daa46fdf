"""Schedules: applied by digest, fired one transaction per firing.

A firing locks its schedule row (``FOR UPDATE SKIP LOCKED``) and re-checks that the slot is
still owed, inserts the run (inside a savepoint, so a refusal becomes a failed firing with
its message instead of aborting the transaction), records the firing and advances the clock,
all in one commit. The re-check is what keeps two schedulers from double-firing even in the
moment a leadership hand-over overlaps a commit.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg

from dirigent.engine.rules.firing import DEFAULT_CATCH_UP, Cadence, Firing, decide
from dirigent.engine.rules.validation.triggers import check_schedule_against
from dirigent.engine.shapes.manifests.pipeline import Pipeline
from dirigent.engine.shapes.manifests.schedule import Schedule, ScheduleSpec
from dirigent.engine.shapes.problems import Problem, ProblemsError, problem
from dirigent.engine.store.pool import affected
from dirigent.engine.store.transactions.definitions import ApplyAction
from dirigent.engine.store.transactions.runs import RunCreated, RunRequest
from dirigent.engine.store.transactions.versions import VersionCache

CreateRun = Callable[[asyncpg.Connection, RunRequest], Awaitable[RunCreated]]


def spec_digest(spec: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def cadence_of(spec: ScheduleSpec) -> Cadence:
    interval = spec.interval.to_timedelta() if spec.interval is not None else None
    at = spec.at if spec.at is None or spec.at.tzinfo else spec.at.replace(tzinfo=dt.UTC)
    return Cadence(cron=spec.cron, interval=interval, at=at, timezone=spec.timezone)


async def check_target(
    conn: asyncpg.Connection, namespace: str, pipeline: str, versions: VersionCache
) -> tuple[Pipeline | None, list[Problem]]:
    """The pipeline a trigger names, parsed; or a problem located at ``spec.pipeline``."""
    row = await conn.fetchrow(
        "SELECT active, current_version_id FROM pipelines WHERE namespace = $1 AND name = $2",
        namespace,
        pipeline,
    )
    if row is None or row["current_version_id"] is None or not row["active"]:
        why = "does not exist" if row is None else "is deactivated"
        return None, [
            problem(
                "trigger.pipeline.not_found",
                f"pipeline '{pipeline}' {why} in namespace '{namespace}'; apply it first",
                "spec",
                "pipeline",
            )
        ]
    return await versions.get(conn, row["current_version_id"]), []


async def apply_schedule(
    conn: asyncpg.Connection,
    schedule: Schedule,
    *,
    namespace: str,
    now: dt.datetime,
    grace: dt.timedelta,
    versions: VersionCache,
    owner_uid: str | None = None,
) -> ApplyAction:
    """Create, update or leave unchanged; the clock is recomputed only when it changed."""
    spec = schedule.spec
    target, problems = await check_target(conn, namespace, spec.pipeline, versions)
    if target is not None:
        problems += check_schedule_against(schedule, target)
    if problems:
        raise ProblemsError(problems)
    doc = spec.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    digest = spec_digest(doc)
    cadence = cadence_of(spec)
    row = await conn.fetchrow(
        "SELECT id, digest, spec, paused, next_fire_at FROM schedules "
        "WHERE namespace = $1 AND name = $2 FOR UPDATE",
        namespace,
        schedule.metadata.name,
    )
    if row is not None and row["digest"] == digest:
        return ApplyAction.UNCHANGED
    fresh = None if spec.paused else cadence.first(now, grace)
    paused = spec.paused or (cadence.one_time and fresh is None)
    if row is not None:
        old = ScheduleSpec.model_validate(row["spec"])
        if cadence_of(old) == cadence and old.paused == spec.paused:
            fresh, paused = row["next_fire_at"], row["paused"]
    values = (
        namespace,
        schedule.metadata.name,
        spec.pipeline,
        doc,
        digest,
        spec.cron,
        cadence.interval // dt.timedelta(milliseconds=1) if cadence.interval else None,
        cadence.at,
        spec.timezone,
        spec.params,
        spec.priority.rank if spec.priority else None,
        paused,
        fresh,
        owner_uid,
    )
    await conn.execute(
        """
        INSERT INTO schedules (namespace, name, pipeline, spec, digest, cron, interval_ms, at,
                               timezone, params, priority, paused, next_fire_at, owner_uid)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
        ON CONFLICT (namespace, name) DO UPDATE SET
            pipeline = EXCLUDED.pipeline, spec = EXCLUDED.spec, digest = EXCLUDED.digest,
            cron = EXCLUDED.cron, interval_ms = EXCLUDED.interval_ms, at = EXCLUDED.at,
            timezone = EXCLUDED.timezone, params = EXCLUDED.params,
            priority = EXCLUDED.priority, paused = EXCLUDED.paused,
            next_fire_at = EXCLUDED.next_fire_at,
            owner_uid = COALESCE(EXCLUDED.owner_uid, schedules.owner_uid), updated_at = now()
        """,
        *values,
    )
    return ApplyAction.CREATED if row is None else ApplyAction.UPDATED


async def set_paused(
    conn: asyncpg.Connection,
    namespace: str,
    name: str,
    paused: bool,
    *,
    now: dt.datetime,
    grace: dt.timedelta,
) -> bool:
    """Pause (no next firing) or resume (recomputed from now: nothing missed is replayed)."""
    row = await conn.fetchrow(
        "SELECT id, spec FROM schedules WHERE namespace = $1 AND name = $2 FOR UPDATE",
        namespace,
        name,
    )
    if row is None:
        return False
    fresh = (
        None if paused else cadence_of(ScheduleSpec.model_validate(row["spec"])).first(now, grace)
    )
    await conn.execute(
        "UPDATE schedules SET paused = $2, next_fire_at = $3, updated_at = now() WHERE id = $1",
        row["id"],
        paused or fresh is None,
        fresh,
    )
    return True


async def delete_schedule(conn: asyncpg.Connection, namespace: str, name: str) -> bool:
    status: str = await conn.execute(
        "DELETE FROM schedules WHERE namespace = $1 AND name = $2", namespace, name
    )
    return affected(status) == 1


async def due(conn: asyncpg.Connection, now: dt.datetime, limit: int) -> list[int]:
    rows = await conn.fetch(
        """SELECT id FROM schedules WHERE next_fire_at IS NOT NULL AND next_fire_at <= $1
           ORDER BY next_fire_at, id LIMIT $2""",
        now,
        limit,
    )
    return [r["id"] for r in rows]


async def next_due(conn: asyncpg.Connection) -> dt.datetime | None:
    value: dt.datetime | None = await conn.fetchval(
        "SELECT min(next_fire_at) FROM schedules WHERE next_fire_at IS NOT NULL"
    )
    return value


@dataclass(frozen=True)
class Fired:
    schedule_id: int
    namespace: str
    name: str
    pipeline: str
    firing: Firing
    run_id: int | None
    message: str | None  # why the firing failed

    @property
    def ok(self) -> bool:
        return self.run_id is not None


async def fire(
    conn: asyncpg.Connection,
    schedule_id: int,
    *,
    now: dt.datetime,
    grace: dt.timedelta,
    create: CreateRun,
    catch_up: int = DEFAULT_CATCH_UP,
) -> Fired | None:
    """Fire one owed slot in the caller's transaction; None when it is no longer owed."""
    row = await conn.fetchrow(
        """SELECT id, namespace, name, pipeline, spec, next_fire_at FROM schedules
           WHERE id = $1 AND next_fire_at IS NOT NULL AND next_fire_at <= $2
           FOR UPDATE SKIP LOCKED""",
        schedule_id,
        now,
    )
    if row is None:
        return None
    spec = ScheduleSpec.model_validate(row["spec"])
    firing = decide(cadence_of(spec), row["next_fire_at"], now, grace, catch_up)
    request = RunRequest(
        row["namespace"],
        row["pipeline"],
        dict(spec.params),
        triggered_by_kind="schedule",
        triggered_by_ref=row["name"],
        priority=spec.priority,
        window=firing.window,
    )
    run_id: int | None = None
    message: str | None = None
    try:
        async with conn.transaction():
            run_id = (await create(conn, request)).run_id
    except ProblemsError as err:
        message = "; ".join(p.render() for p in err.problems)
    await conn.execute(
        """
        WITH f AS (
            INSERT INTO schedule_firings (schedule_id, scheduled_for, fired_at, result, misfire,
                                          run_id, message)
            VALUES ($1, $2, $3, $4, $5, $6, $7)
        )
        UPDATE schedules SET next_fire_at = $8, paused = paused OR $8::timestamptz IS NULL,
               last_fire_at = $3, last_run_id = COALESCE($6, last_run_id), last_error = $7
        WHERE id = $1
        """,
        schedule_id,
        firing.scheduled_for,
        now,
        "fired" if run_id is not None else "failed",
        firing.misfire,
        run_id,
        message,
        firing.next_fire_at,
    )
    return Fired(
        schedule_id, row["namespace"], row["name"], row["pipeline"], firing, run_id, message
    )
