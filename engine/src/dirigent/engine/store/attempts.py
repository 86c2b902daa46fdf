"""Attempts: the claim, the lease, parking, and the outcome transaction.

The claim is one statement: ``FOR UPDATE SKIP LOCKED`` over the due rows, ordered by
priority, then fairness between runs (``fair_seq``: an attempt's position among its run's
queued work, so a 400-item fan-out and a two-step run interleave), then due time, then id.
Every predicate that decides claimability sits on the locked ``step_attempts`` relation
itself, because when SKIP LOCKED waits out a concurrent commit it re-checks only those.

The outcome is one transaction that locks the run row first (see ``store.progress``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from dirigent.engine.manifests.pipeline import Pipeline
from dirigent.engine.progression import fan_out_outcome
from dirigent.engine.store.progress import advance_run, notify_work
from dirigent.engine.store.runs import start_queued_run
from dirigent.engine.store.versions import VersionCache

CLAIM = """
WITH queued AS (
    SELECT id FROM step_attempts
    WHERE status = 'queued' AND available_at <= now() AND requires_workers <@ $3::jsonb
    ORDER BY priority DESC, fair_seq, available_at, id
    LIMIT $2 FOR UPDATE SKIP LOCKED
),
polls AS (
    SELECT id FROM step_attempts
    WHERE status = 'waiting' AND next_poll_at <= now() AND requires_workers <@ $3::jsonb
    ORDER BY next_poll_at, id
    LIMIT $2 FOR UPDATE SKIP LOCKED
),
due AS (SELECT id FROM queued UNION ALL SELECT id FROM polls),
claimed AS (
    UPDATE step_attempts a
    SET status = 'running', lease_owner = $1, lease_expires_at = now() + $4::interval,
        started_at = now(), first_started_at = COALESCE(a.first_started_at, now())
    FROM (SELECT id FROM due LIMIT $2) d
    WHERE a.id = d.id
    RETURNING a.id, a.run_id, a.run_item_id, a.step, a.item_index, a.number, a.kind, a.block,
              a.first_started_at, a.cursor, a.handle, a.fetched, a.wait_message, a.gone_count,
              a.available_at, a.next_poll_at
)
SELECT c.*, r.params, r.version_id, r.window_start, r.window_end, r.namespace, p.name AS pipeline,
       i.value AS item_value
FROM claimed c
JOIN runs r ON r.id = c.run_id
JOIN pipelines p ON p.id = r.pipeline_id
LEFT JOIN run_items i ON i.id = c.run_item_id
"""


@dataclass(frozen=True)
class Claimed:
    """One attempt this worker now holds a lease on."""

    id: int
    run_id: int
    run_item_id: int | None
    step: str
    item_index: int | None
    number: int
    kind: str
    block: str
    first_started_at: datetime
    cursor: dict[str, Any] | None
    handle: dict[str, Any] | None
    fetched: Any
    wait_message: str | None
    gone_count: int
    due_at: datetime  # when it became claimable: available_at or next_poll_at
    params: dict[str, Any]
    version_id: int
    window: tuple[datetime, datetime] | None
    namespace: str
    pipeline: str
    item_value: Any

    @property
    def probing(self) -> bool:
        """True when this is a waiting attempt come due (a poke or a probe), not a first run."""
        return self.handle is not None or self.cursor is not None or self.wait_message is not None


async def claim(
    conn: asyncpg.Connection, worker_id: str, *, limit: int, tags: list[str], lease: timedelta
) -> list[Claimed]:
    rows = await conn.fetch(CLAIM, worker_id, limit, tags, lease)
    out: list[Claimed] = []
    for r in rows:
        window = (r["window_start"], r["window_end"]) if r["window_start"] is not None else None
        due = (
            r["next_poll_at"]
            if r["handle"] is not None or r["cursor"] is not None
            else r["available_at"]
        )
        out.append(
            Claimed(
                r["id"],
                r["run_id"],
                r["run_item_id"],
                r["step"],
                r["item_index"],
                r["number"],
                r["kind"],
                r["block"],
                r["first_started_at"],
                r["cursor"],
                r["handle"],
                r["fetched"],
                r["wait_message"],
                r["gone_count"],
                due or r["available_at"],
                r["params"],
                r["version_id"],
                window,
                r["namespace"],
                r["pipeline"],
                r["item_value"],
            )
        )
    return out


async def heartbeat(
    conn: asyncpg.Connection, worker_id: str, ids: list[int], lease: timedelta
) -> set[int]:
    """Extend the leases this worker holds; returns the ids it still holds (others were cancelled)."""
    if not ids:
        return set()
    rows = await conn.fetch(
        """UPDATE step_attempts SET lease_expires_at = now() + $3::interval
           WHERE id = ANY($2) AND lease_owner = $1 AND status = 'running' RETURNING id""",
        worker_id,
        ids,
        lease,
    )
    return {r["id"] for r in rows}


@dataclass
class LogLine:
    level: str
    message: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class Artifact:
    name: str
    content_type: str
    size: int
    digest: str
    inline: Any = None
    uri: str | None = None


@dataclass
class Outcome:
    """What a worker reports for an attempt it held."""

    attempt: Claimed
    worker_id: str
    status: str  # succeeded | failed | skipped
    input: Any = None
    output: Any = None
    artifact: Artifact | None = None
    error_class: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    error_params: dict[str, Any] | None = None
    logs: list[LogLine] = field(default_factory=list)


@dataclass(frozen=True)
class Settled:
    discarded: bool = False  # the attempt was no longer ours (cancelled, recovered)
    retry_at: datetime | None = None
    run_status: str | None = None


def backoff_delay(pipeline: Pipeline, step: str, number: int) -> timedelta:
    """Exponential backoff with full jitter in the upper half: base·2^(n-1), capped."""
    retry = pipeline.spec.steps[step].retry
    if retry is None:
        return timedelta(0)
    base = retry.backoff.total_seconds() * (2 ** (number - 1))
    capped = min(base, retry.max_backoff.total_seconds())
    return timedelta(seconds=capped * random.uniform(0.5, 1.0))


async def write_logs(conn: asyncpg.Connection, attempt: Claimed, lines: list[LogLine]) -> None:
    if not lines:
        return
    await conn.executemany(
        """INSERT INTO log_entries (run_id, attempt_id, run_item_id, step, level, message, fields)
           VALUES ($1, $2, $3, $4, $5, $6, $7)""",
        [
            (
                attempt.run_id,
                attempt.id,
                attempt.run_item_id,
                attempt.step,
                ln.level,
                ln.message,
                ln.fields,
            )
            for ln in lines
        ],
    )


async def park(
    conn: asyncpg.Connection,
    attempt: Claimed,
    worker_id: str,
    *,
    next_poll: timedelta,
    handle: dict[str, Any] | None = None,
    cursor: dict[str, Any] | None = None,
    message: str | None = None,
    progress: float | None = None,
    logs: list[LogLine] | None = None,
    gone_count: int = 0,
    input: Any = None,
) -> bool:
    """Put a running attempt back to waiting with its next due time; False if no longer ours."""
    status: str = await conn.execute(
        """UPDATE step_attempts
           SET status = 'waiting', next_poll_at = now() + $3::interval, lease_owner = NULL,
               lease_expires_at = NULL, handle = COALESCE($4, handle), cursor = $5,
               wait_message = $6, wait_progress = $7, gone_count = $8, input = COALESCE($9, input)
           WHERE id = $1 AND lease_owner = $2 AND status = 'running'""",
        attempt.id,
        worker_id,
        next_poll,
        handle,
        cursor,
        message,
        progress,
        gone_count,
        input,
    )
    if status.endswith(" 0"):
        return False
    await write_logs(conn, attempt, logs or [])
    return True


async def settle(conn: asyncpg.Connection, outcome: Outcome, versions: VersionCache) -> Settled:
    """Record an attempt's outcome and everything it implies, in the caller's transaction."""
    a = outcome.attempt
    run = await conn.fetchrow(
        "SELECT status, pipeline_id, version_id FROM runs WHERE id = $1 FOR UPDATE", a.run_id
    )
    row = await conn.fetchrow(
        """UPDATE step_attempts
           SET status = $3, input = COALESCE($4, input), output = $5, error_class = $6, error_code = $7,
               error_message = $8, error_params = $9, finished_at = now(), lease_owner = NULL,
               lease_expires_at = NULL
           WHERE id = $1 AND lease_owner = $2 AND status = 'running'
           RETURNING id""",
        a.id,
        outcome.worker_id,
        outcome.status,
        outcome.input,
        outcome.output,
        outcome.error_class,
        outcome.error_code,
        outcome.error_message,
        outcome.error_params,
    )
    if row is None or run is None:
        return Settled(discarded=True)
    await write_logs(conn, a, outcome.logs)
    if outcome.artifact is not None:
        art = outcome.artifact
        await conn.execute(
            """INSERT INTO artifact_refs (run_id, attempt_id, name, content_type, size, digest, inline, uri)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8)""",
            a.run_id,
            a.id,
            art.name,
            art.content_type,
            art.size,
            art.digest,
            art.inline if art.uri is None else None,
            art.uri,
        )
    await conn.execute("UPDATE runs SET last_progress_at = now() WHERE id = $1", a.run_id)
    pipeline = await versions.get(conn, a.version_id)
    step = pipeline.spec.steps[a.step]

    if (
        outcome.status == "failed"
        and a.kind == "automatic"
        and outcome.error_class in ("transient", "unknown")
        and a.number < step.max_attempts
    ):
        delay = backoff_delay(pipeline, a.step, a.number)
        retry_at: datetime = await conn.fetchval(
            """
            WITH seq AS (UPDATE runs SET queued_seq = queued_seq + 1 WHERE id = $1 RETURNING queued_seq)
            INSERT INTO step_attempts (run_id, run_item_id, step, item_index, number, kind, status, priority,
                                       requires_workers, block, available_at, fair_seq)
            SELECT run_id, run_item_id, step, item_index, number + 1, 'automatic', 'queued', priority,
                   requires_workers, block, now() + $3::interval, (SELECT queued_seq FROM seq)
            FROM step_attempts WHERE id = $2
            RETURNING available_at
            """,
            a.run_id,
            a.id,
            delay,
        )
        await write_logs(
            conn,
            a,
            [
                LogLine(
                    "warning",
                    f"attempt {a.number} failed; retrying in {delay.total_seconds():.1f}s",
                    {"attempt": a.number, "delay_s": round(delay.total_seconds(), 3)},
                )
            ],
        )
        if delay <= timedelta(0):
            await notify_work(conn)
        return Settled(retry_at=retry_at)

    step_status: str | None
    with_errors = False
    if a.run_item_id is not None:
        await conn.execute(
            "UPDATE run_items SET status = $2, finished_at = now(), error_message = $3 WHERE id = $1",
            a.run_item_id,
            outcome.status,
            outcome.error_message,
        )
        counts = await conn.fetchrow(
            f"""UPDATE run_steps SET items_{outcome.status} = items_{outcome.status} + 1
                WHERE run_id = $1 AND step = $2 AND status = 'running'
                RETURNING items, items_succeeded, items_failed, items_skipped, items_cancelled""",
            a.run_id,
            a.step,
        )
        if counts is None:  # the step already settled (FailFast): nothing more to decide
            return Settled()
        step_status, with_errors = fan_out_outcome(
            step.on_item_failure,
            counts["items"],
            counts["items_succeeded"],
            counts["items_failed"],
            counts["items_skipped"],
            counts["items_cancelled"],
        )
        if step_status == "failed":
            await conn.execute(
                """UPDATE step_attempts SET status = 'cancelled', finished_at = now(), lease_owner = NULL,
                          error_message = 'another item failed (onItemFailure: FailFast)'
                   WHERE run_id = $1 AND step = $2 AND status IN ('pending', 'queued', 'waiting', 'running')""",
                a.run_id,
                a.step,
            )
            await conn.execute(
                """UPDATE run_items SET status = 'cancelled', finished_at = now()
                   WHERE run_id = $1 AND step = $2 AND status NOT IN ('succeeded', 'failed', 'skipped', 'cancelled')""",
                a.run_id,
                a.step,
            )
    else:
        step_status = outcome.status
    if step_status is None:
        return Settled()
    await conn.execute(
        """UPDATE run_steps SET status = $3, with_errors = $4, finished_at = now()
           WHERE run_id = $1 AND step = $2""",
        a.run_id,
        a.step,
        step_status,
        with_errors,
    )
    advanced = await advance_run(conn, a.run_id, pipeline)
    if advanced.run_status is not None:
        await start_queued_run(conn, run["pipeline_id"], versions)
    return Settled(run_status=advanced.run_status)
