"""Backfill: one run per window a schedule's cadence already went past, in order.

Half-open ``[from, to)``, so two adjacent backfills tile. Each run carries the window that
firing would have carried and is attributed ``backfill``. The schedule's own clock and its
firing history are untouched: these firings never happened. The pipeline's concurrency
policy is not overridden; each window's refusal is reported rather than hidden. More than
``MAX_BACKFILL`` runs is refused with the count, because that is usually a typo in a year.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import asyncpg

from dirigent.engine.rules.firing import MAX_BACKFILL
from dirigent.engine.shapes.manifests.schedule import ScheduleSpec
from dirigent.engine.shapes.problems import ProblemsError, problem
from dirigent.engine.shapes.views import BackfillResult, BackfillWindow
from dirigent.engine.store.transactions.runs import RunRequest
from dirigent.engine.store.transactions.schedules import CreateRun, cadence_of

COUNT_LIMIT = 100_000  # enumerated to name the count in a refusal; beyond, "more than"


def _aware(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


async def backfill(
    conn: asyncpg.Connection,
    namespace: str,
    pipeline: str,
    *,
    schedule: str,
    start: dt.datetime,
    end: dt.datetime,
    params: dict[str, Any] | None,
    create: CreateRun,
    dry_run: bool = False,
) -> BackfillResult:
    """Create the runs in the caller's transaction (a dry run rolls it back)."""
    start, end = _aware(start), _aware(end)
    row = await conn.fetchrow(
        "SELECT spec FROM schedules WHERE namespace = $1 AND name = $2 AND pipeline = $3",
        namespace,
        schedule,
        pipeline,
    )
    if row is None:
        raise ProblemsError(
            [
                problem(
                    "backfill.schedule.not_found",
                    f"no schedule '{schedule}' of pipeline '{pipeline}' in '{namespace}'",
                    "schedule",
                )
            ]
        )
    spec = ScheduleSpec.model_validate(row["spec"])
    cadence = cadence_of(spec)
    if cadence.one_time:
        raise ProblemsError(
            [
                problem(
                    "backfill.schedule.one_time",
                    f"schedule '{schedule}' fires once (at); it has no cadence to backfill",
                    "schedule",
                )
            ]
        )
    if start >= end:
        raise ProblemsError(
            [problem("backfill.range.invalid", "'from' must be before 'to' ([from, to))", "from")]
        )
    slots = cadence.occurrences(start, end, COUNT_LIMIT)
    if len(slots) > MAX_BACKFILL:
        count = f"more than {COUNT_LIMIT}" if len(slots) > COUNT_LIMIT else str(len(slots))
        raise ProblemsError(
            [
                problem(
                    "backfill.too_many",
                    f"this backfill would create {count} runs; the cap is {MAX_BACKFILL} per "
                    "request: narrow [from, to)",
                    "to",
                    count=count,
                    cap=MAX_BACKFILL,
                )
            ]
        )
    windows = [
        await _one(conn, namespace, pipeline, schedule, spec, s, params, create) for s in slots
    ]
    created = sum(1 for w in windows if w.run_id is not None)
    return BackfillResult(
        pipeline=pipeline,
        schedule=schedule,
        dry_run=dry_run,
        created=created,
        refused=len(windows) - created,
        windows=windows,
    )


async def _one(
    conn: asyncpg.Connection,
    namespace: str,
    pipeline: str,
    schedule: str,
    spec: ScheduleSpec,
    slot: dt.datetime,
    params: dict[str, Any] | None,
    create: CreateRun,
) -> BackfillWindow:
    window = cadence_of(spec).window(slot)
    assert window is not None
    request = RunRequest(
        namespace,
        pipeline,
        dict(params if params is not None else spec.params),
        triggered_by_kind="backfill",
        triggered_by_ref=f"schedule/{schedule}",
        priority=spec.priority,
        window=window,
    )
    try:
        async with conn.transaction():
            made = await create(conn, request)
    except ProblemsError as err:
        return BackfillWindow(start=window[0], end=window[1], problems=err.problems)
    return BackfillWindow(start=window[0], end=window[1], run_id=made.run_id, status=made.status)
