"""Recording outcomes (``attempts.Outcome``: what a worker reports for an attempt it held) and
parking attempts (``attempts.Parking``), durably.

Finishing is one transaction that locks the run rows first, in id order (see
``store.progress`` for why the lock comes before any write); parking an attempt back to
waiting needs no run lock. Both are batched: a worker records whatever finished in the same
moment with one statement per kind of write. The attempts' log lines go in the same
statement as the attempts they belong to (``store.logs.INSERT_LOGS``), so an attempt this
worker no longer holds writes none.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from dirigent.engine.rules.progression import fan_out_outcome
from dirigent.engine.shapes.attempts import Claimed, LogLine, Outcome, Parking
from dirigent.engine.shapes.manifests.enums import ConcurrencyPolicy
from dirigent.engine.shapes.manifests.pipeline import Pipeline
from dirigent.engine.shapes.statuses import WorkStatus
from dirigent.engine.store.leases import ATTEMPTS
from dirigent.engine.store.named import named
from dirigent.engine.store.pool import affected
from dirigent.engine.store.transactions.logs import INSERT_LOGS, LogRow, log_values, write_logs
from dirigent.engine.store.transactions.progress import (
    Advanced,
    Ended,
    advance_runs,
    next_attempts,
    notify_work,
)
from dirigent.engine.store.transactions.runs import cancel_open_work, start_queued_run
from dirigent.engine.store.transactions.versions import VersionCache

FAIL_FAST_REASON = "another item failed (onItemFailure: FailFast)"
Locked = Mapping[int, Mapping[str, Any]]  # run id: the locked run's id, pipeline_id, version_id


@dataclass(frozen=True)
class RecordResult:
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


async def record_fetched(
    conn: asyncpg.Connection, attempt: Claimed, worker_id: str, value: Any
) -> bool:
    """Commit what fetch returned before the outcome records: a replay records from it."""
    status: str = await conn.execute(
        f"""UPDATE step_attempts SET fetched = $3
           WHERE id = $1 AND {ATTEMPTS.held_by("$2")} AND status = '{WorkStatus.RUNNING}'""",
        attempt.id,
        worker_id,
        value,
    )
    return affected(status) == 1


async def park_many(conn: asyncpg.Connection, worker_id: str, parkings: list[Parking]) -> set[int]:
    """Put attempts back to waiting with their next due times, as one statement.

    Parking needs no run lock: it changes no step or run state. Returns the ids parked (an
    attempt no longer held by this worker is left alone). The handle, cursor and meta are
    written here, so what a probe or poke learned survives a crash from this commit on.
    """
    if not parkings:
        return set()
    logs = [LogRow.of(p.attempt, ln) for p in parkings for ln in p.logs]
    sql, args = named(
        f"""
        WITH l AS (  -- the rows are locked already; read by key, as ``RECORD`` says why
            SELECT id, lease_owner, status FROM step_attempts WHERE id = ANY(:ids::bigint[])
        ),
        u AS (
            UPDATE step_attempts a
            SET status = '{WorkStatus.WAITING}', next_poll_at = now() + p.poll, {ATTEMPTS.release()},
                handle = COALESCE(p.handle::jsonb, a.handle),
                cursor = COALESCE(p.cursor::jsonb, a.cursor), wait_message = p.msg, wait_progress = p.prog,
                gone_count = p.gone, input = COALESCE(p.input::jsonb, a.input), probe_errors = p.errs
            FROM unnest(:ids::bigint[], :polls::interval[], :handles::text[], :cursors::text[],
                        :messages::text[], :progress::float8[], :gone::int[], :inputs::text[],
                        :probe_errors::int[])
                 AS p(id, poll, handle, cursor, msg, prog, gone, input, errs)
            JOIN l ON l.id = p.id
            WHERE a.id = l.id AND {ATTEMPTS.held_by(":worker_id", "l.")} AND l.status = '{WorkStatus.RUNNING}'
            RETURNING a.id
        ),
        logs AS ({INSERT_LOGS} WHERE line.attempt_id IN (SELECT id FROM u))
        SELECT id FROM u
        """,
        ids=[p.attempt.id for p in parkings],
        polls=[p.next_poll for p in parkings],
        handles=[_json(p.handle) for p in parkings],
        cursors=[_json(p.cursor) for p in parkings],
        messages=[p.message for p in parkings],
        progress=[p.progress for p in parkings],
        gone=[p.gone_count for p in parkings],
        inputs=[_json(p.input) for p in parkings],
        probe_errors=[p.probe_errors for p in parkings],
        worker_id=worker_id,
        **log_values(logs),
    )
    rows = await conn.fetch(sql, *args)
    parked = {r["id"] for r in rows}
    orphans = [p for p in parkings if p.attempt.id not in parked and p.handle is not None]
    if orphans:
        # Cancelled while execute was submitting: the job exists, so its handle joins the
        # cancel outbox instead of being dropped.
        await conn.execute(
            f"""UPDATE step_attempts a SET handle = o.handle::jsonb,
                      input = COALESCE(a.input, o.input::jsonb)
               FROM unnest($1::bigint[], $2::text[], $3::text[]) AS o(id, handle, input)
               WHERE a.id = o.id AND a.status = '{WorkStatus.CANCELLED}' AND a.handle IS NULL""",
            [p.attempt.id for p in orphans],
            [_json(p.handle) for p in orphans],
            [_json(p.input) for p in orphans],
        )
    return parked


def will_retry(o: Outcome, pipeline: Pipeline) -> bool:
    """A failure the retry policy answers with another attempt (a manual attempt never is)."""
    a = o.attempt
    return (
        o.status == "failed"
        and a.kind == "automatic"
        and o.error_class in ("transient", "unknown")
        and a.number < pipeline.spec.steps[a.step].max_attempts
    )


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


async def lock_batch(
    conn: asyncpg.Connection, attempts: list[Claimed], versions: VersionCache
) -> None:
    """Take a writer transaction's locks before any write, in the one global order.

    Pipelines first (only those whose pinned version queues runs: a run finishing may start
    the next queued one, which locks its pipeline), then every run the batch touches, in id
    order, then the batch's attempt rows, in id order (as the heartbeat takes them). Runs are
    locked ``FOR NO KEY UPDATE``: writers still exclude each other per run, but a claim (whose
    event rows take a key-share lock on their runs through the foreign key) never waits on a
    writer while holding attempt rows the writer wants. Writing a parking's log line first
    would take a key-share lock on its run, and a finish would then wait on another run while
    holding it: two workers could deadlock. ``test_processes.py`` checks PostgreSQL's own
    deadlock counter stays put under two workers.

    ``record_many`` takes the same locks in the same order without this function, each
    within the statement that first writes the rows (the runs with their progress, the
    attempts with their outcomes): two round trips fewer while the run rows are held.
    """
    if not attempts:
        return
    await _lock_queue_pipelines(conn, attempts, versions)
    await lock_runs(conn, sorted({a.run_id for a in attempts}))
    await conn.execute(
        "SELECT 1 FROM step_attempts WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE",
        sorted({a.id for a in attempts}),
    )


async def _lock_queue_pipelines(
    conn: asyncpg.Connection, attempts: list[Claimed], versions: VersionCache
) -> None:
    await lock_queue_pipelines(conn, {(a.run_id, a.version_id) for a in attempts}, versions)


async def lock_queue_pipelines(
    conn: asyncpg.Connection, runs: set[tuple[int, int]], versions: VersionCache
) -> None:
    """The pipelines of runs (id, version id) under the Queue policy, in id order: finishing
    one of those runs may start the next, which locks its pipeline."""
    queue_runs = sorted(
        {
            run_id
            for run_id, version_id in runs
            if (await versions.get(conn, version_id)).spec.concurrency is ConcurrencyPolicy.QUEUE
        }
    )
    if queue_runs:
        await conn.execute(
            """SELECT 1 FROM pipelines WHERE id IN (SELECT pipeline_id FROM runs WHERE id = ANY($1))
               ORDER BY id FOR NO KEY UPDATE""",
            queue_runs,
        )


async def record_one(
    conn: asyncpg.Connection, outcome: Outcome, versions: VersionCache
) -> RecordResult:
    """Record one attempt's outcome; see ``record_many``."""
    return (await record_many(conn, [outcome], versions))[0]


async def record_many(
    conn: asyncpg.Connection, outcomes: list[Outcome], versions: VersionCache
) -> list[RecordResult]:
    """Record attempts' outcomes and everything they imply, in the caller's transaction.

    Batching is what lets a worker keep pace with a wide fan-out and with many small runs:
    the runs involved are locked once, in id order (so two batches can never deadlock on
    each other), and each kind of write is one statement for the whole batch, whatever the
    number of runs in it: record (with the fan-out counters), retry, finish steps, advance
    runs. A worker sends here only what ``store.counting`` cannot count without the run
    lock (plain steps' outcomes, retries); a fan-out's items that do not retry are counted
    there, and only the batch that ends the step takes the run's row.
    """
    if not outcomes:
        return []
    worker_ids = {o.worker_id for o in outcomes}
    assert len(worker_ids) == 1, "a batch comes from one worker"
    pipelines = {o.attempt.id: await versions.get(conn, o.attempt.version_id) for o in outcomes}
    # The lock order of ``lock_batch``: pipelines, then runs and attempts (``record`` takes
    # both, runs first).
    await _lock_queue_pipelines(conn, [o.attempt for o in outcomes], versions)
    retrying = {o.attempt.id for o in outcomes if will_retry(o, pipelines[o.attempt.id])}
    rec = await record(conn, outcomes, next(iter(worker_ids)), retrying, lock_runs=True)
    results: dict[int, RecordResult] = {
        o.attempt.id: RecordResult(discarded=True) for o in outcomes
    }
    live = [o for o in outcomes if o.attempt.id in rec.accepted and o.attempt.run_id in rec.locked]
    retries = [o.attempt for o in live if o.attempt.id in retrying]
    retry_at = await _queue_retries(conn, [(a, pipelines[a.id]) for a in retries])
    for o in live:
        at = retry_at.get(o.attempt.id)
        results[o.attempt.id] = RecordResult() if at is None else RecordResult(retry_at=at)
    kept = [o for o in live if o.attempt.id not in retrying]
    terminal = {
        (o.attempt.run_id, o.attempt.step): (o.status, False)
        for o in kept
        if o.attempt.run_item_id is None
    }
    terminal.update(await finish_fan_outs(conn, rec.counters, rec.locked, versions))
    retried = {a.run_id for a in retries}  # their rows noted progress with their counters
    advanced = await advance(conn, terminal, rec.locked, versions, noted=retried)
    for o in live:
        status = getattr(advanced.get(o.attempt.run_id), "run_status", None)
        if status is not None:
            results[o.attempt.id] = RecordResult(run_status=status)
    return [results[o.attempt.id] for o in outcomes]


async def lock_runs(conn: asyncpg.Connection, run_ids: list[int]) -> Locked:
    """Lock the runs in id order (no two batches deadlock); their ids, pipelines, versions."""
    rows = await conn.fetch(
        """SELECT id, pipeline_id, version_id FROM runs WHERE id = ANY($1)
           ORDER BY id FOR NO KEY UPDATE""",
        run_ids,
    )
    return {r["id"]: r for r in rows}


async def note_progress(conn: asyncpg.Connection, run_ids: list[int]) -> None:
    """The runs made progress (a stuck one is no longer); callers hold their locks."""
    if run_ids:
        await conn.execute(
            "UPDATE runs SET last_progress_at = now(), stuck_at = NULL WHERE id = ANY($1)",
            run_ids,
        )


# ``record``'s statement: the runs locked in id order (``lr``, none when counting), then the
# attempts (``l``: its InitPlan reads ``lr`` first, so no attempt row is locked before every
# run row is, the global order), then updated (``u``); what follows writes only for the
# attempts ``u`` updated. Whether an attempt is still this worker's is read from ``l``, the
# locked row's latest version: a predicate on ``a`` would match the partial lease index, and
# a planner whose statistics predate the batch's work then scans every running attempt for
# the few by primary key.
RECORD = f"""
    WITH lr AS (
        SELECT id, pipeline_id, version_id FROM runs WHERE id = ANY(:run_ids::bigint[])
        ORDER BY id FOR NO KEY UPDATE
    ),
    l AS (
        SELECT id, lease_owner, status FROM step_attempts
        WHERE id = ANY(:ids::bigint[]) AND (SELECT count(*) FROM lr) >= 0
        ORDER BY id FOR NO KEY UPDATE
    ),
    u AS (
        UPDATE step_attempts a
        SET status = u.status, input = COALESCE(u.input::jsonb, a.input), output = u.output::jsonb,
            error_class = u.error_class, error_code = u.error_code, error_message = u.error_message,
            error_params = u.error_params::jsonb, finished_at = now(), {ATTEMPTS.release()}
        FROM unnest(:ids::bigint[], :statuses::text[], :inputs::text[], :outputs::text[],
                    :error_classes::text[], :error_codes::text[], :error_messages::text[],
                    :error_params::text[])
             AS u(id, status, input, output, error_class, error_code, error_message, error_params)
        JOIN l ON l.id = u.id
        WHERE a.id = l.id AND {ATTEMPTS.held_by(":worker_id", "l.")} AND l.status = '{WorkStatus.RUNNING}'
        RETURNING a.id
    ),
    arts AS (
        INSERT INTO artifact_refs (run_id, attempt_id, name, content_type, size, digest, inline, uri)
        SELECT r, a, n, c, z, d, i::jsonb, uri
        FROM unnest(:art_run_ids::bigint[], :art_attempt_ids::bigint[], :art_names::text[],
                    :art_types::text[], :art_sizes::bigint[], :art_digests::text[],
                    :art_inline::text[], :art_uris::text[]) AS t(r, a, n, c, z, d, i, uri)
        WHERE t.a IN (SELECT id FROM u)
        RETURNING 1
    ),
    logs AS ({INSERT_LOGS} WHERE line.attempt_id IN (SELECT id FROM u) RETURNING 1),
    t AS (
        SELECT * FROM unnest(:item_ids::bigint[], :item_attempt_ids::bigint[],
                             :item_statuses::text[], :item_errors::text[], :item_run_ids::bigint[],
                             :item_steps::text[]) AS t(id, a, status, error, run_id, step)
        WHERE t.a IN (SELECT id FROM u)
    ),
    items AS (
        UPDATE run_items i SET status = t.status, finished_at = now(), error_message = t.error
        FROM t WHERE i.id = t.id
        RETURNING 1
    ),
    -- The counters last: the step's counter row is the one every worker counting a fan-out
    -- writes, so it is locked only once the rest is written (the InitPlan below runs arts,
    -- logs and items first), not while they are.
    written AS (
        SELECT (SELECT count(*) FROM arts) + (SELECT count(*) FROM logs)
               + (SELECT count(*) FROM items) AS n
    ),
    counts AS (
        UPDATE run_steps s SET items_succeeded = s.items_succeeded + c.ok,
               items_failed = s.items_failed + c.failed, items_skipped = s.items_skipped + c.skipped
        FROM (SELECT run_id, step, count(*) FILTER (WHERE status = 'succeeded') AS ok,
                     count(*) FILTER (WHERE status = 'failed') AS failed,
                     count(*) FILTER (WHERE status = 'skipped') AS skipped
              FROM t GROUP BY run_id, step) c
        WHERE s.run_id = c.run_id AND s.step = c.step AND s.status = '{WorkStatus.RUNNING}'
          AND (SELECT n FROM written) >= 0
        RETURNING s.run_id, s.step, s.items, s.items_succeeded, s.items_failed, s.items_skipped,
                  s.items_cancelled
    )
    SELECT (SELECT coalesce(array_agg(id), '{{}}') FROM u) AS ids,
           (SELECT coalesce(jsonb_agg(to_jsonb(counts)), '[]') FROM counts) AS counters,
           (SELECT coalesce(jsonb_agg(to_jsonb(lr)), '[]') FROM lr) AS runs
    """


@dataclass(frozen=True)
class Recorded:
    accepted: set[int]  # the attempts recorded (one no longer this worker's is not)
    counters: list[dict[str, Any]]  # of every fan-out step whose items the batch recorded
    locked: Locked  # the runs locked, when asked to: id, pipeline_id, version_id


async def record(
    conn: asyncpg.Connection,
    outcomes: list[Outcome],
    worker_id: str,
    retrying: set[int],
    *,
    lock_runs: bool,
) -> Recorded:
    """One statement records the whole batch: attempts, artifacts, logs, items and the
    fan-out counters.

    With ``lock_runs``, the batch's runs are locked first, in id order; then the attempt
    rows, in id order (``l``: the order ``lock_batch`` and the heartbeat take them), and
    only then updated. Everything but the attempt update is filtered by the attempts it
    actually updated, so an attempt that is no longer ours writes nothing. The counters are
    those of every fan-out step whose items this batch recorded (a step already finished, by
    FailFast, is not among them).
    """
    logs = [LogRow.of(o.attempt, ln) for o in outcomes for ln in o.logs]
    arts = [(o.attempt, o.artifact) for o in outcomes if o.artifact is not None]
    items = [
        o for o in outcomes if o.attempt.run_item_id is not None and o.attempt.id not in retrying
    ]
    sql, args = named(
        RECORD,
        run_ids=sorted({o.attempt.run_id for o in outcomes}) if lock_runs else [],
        ids=[o.attempt.id for o in outcomes],
        statuses=[o.status for o in outcomes],
        inputs=[_json(o.input) for o in outcomes],
        outputs=[_json(o.output) for o in outcomes],
        error_classes=[o.error_class for o in outcomes],
        error_codes=[o.error_code for o in outcomes],
        error_messages=[o.error_message for o in outcomes],
        error_params=[_json(o.error_params) for o in outcomes],
        worker_id=worker_id,
        art_run_ids=[c.run_id for c, _ in arts],
        art_attempt_ids=[c.id for c, _ in arts],
        art_names=[x.name for _, x in arts],
        art_types=[x.content_type for _, x in arts],
        art_sizes=[x.size for _, x in arts],
        art_digests=[x.digest for _, x in arts],
        art_inline=[_json(x.inline) if x.uri is None else None for _, x in arts],
        art_uris=[x.uri for _, x in arts],
        item_ids=[o.attempt.run_item_id for o in items],
        item_attempt_ids=[o.attempt.id for o in items],
        item_statuses=[o.status for o in items],
        item_errors=[o.error_message for o in items],
        item_run_ids=[o.attempt.run_id for o in items],
        item_steps=[o.attempt.step for o in items],
        **log_values(logs),
    )
    row = await conn.fetchrow(sql, *args)
    assert row is not None
    return Recorded(set(row["ids"]), list(row["counters"]), {r["id"]: r for r in row["runs"]})


async def _queue_retries(
    conn: asyncpg.Connection, retries: list[tuple[Claimed, Pipeline]]
) -> dict[int, datetime]:
    """Each failed attempt the policy retries gets its successor, due after its backoff.

    One statement for the batch: successors are numbered for fairness after their run's
    earlier work (each run's counter moves past all of its retries at once), and one log
    line per retry says when. Returns each failed attempt's retry time; a zero delay wakes
    idle workers.
    """
    if not retries:
        return {}
    retries = sorted(retries, key=lambda r: r[0].id)  # fairness follows the attempts' order
    delays = [backoff_delay(p, a.step, a.number) for a, p in retries]
    rows = await next_attempts(
        conn,
        [a.id for a, _ in retries],
        kind="automatic",
        status=WorkStatus.QUEUED,
        delays=delays,
    )
    due = {(r["run_id"], r["step"], r["item_index"]): r["available_at"] for r in rows}
    logs = [
        LogRow.of(
            a,
            LogLine(
                "warning",
                f"attempt {a.number} failed; retrying in {d.total_seconds():.1f}s",
                {"attempt": a.number, "delay_s": round(d.total_seconds(), 3)},
            ),
        )
        for (a, _), d in zip(retries, delays, strict=True)
    ]
    await write_logs(conn, logs)
    if any(d <= timedelta(0) for d in delays):
        await notify_work(conn)
    return {a.id: due[(a.run_id, a.step, a.item_index)] for a, _ in retries}


def counted_outcome(pipeline: Pipeline, counters: Mapping[str, Any]) -> tuple[str | None, bool]:
    """A fan-out step's status from its counter row (``fan_out_outcome``); None while open."""
    return fan_out_outcome(
        pipeline.spec.steps[counters["step"]].on_item_failure,
        counters["items"],
        counters["items_succeeded"],
        counters["items_failed"],
        counters["items_skipped"],
        counters["items_cancelled"],
    )


async def finish_fan_outs(
    conn: asyncpg.Connection,
    counters: list[dict[str, Any]],
    locked: Locked,
    versions: VersionCache,
) -> dict[tuple[int, str], tuple[str, bool]]:
    """The fan-out steps whose counters (``record`` added this batch's items to them) now
    finish them, with their status; FailFast cancels the rest of a failed one's work."""
    terminal: dict[tuple[int, str], tuple[str, bool]] = {}
    for row in sorted(counters, key=lambda r: (r["run_id"], r["step"])):
        run_id, step_name = row["run_id"], row["step"]
        pipeline = await versions.get(conn, locked[run_id]["version_id"])
        status, with_errors = counted_outcome(pipeline, row)
        if status == "failed":
            await cancel_open_work(conn, run_id, FAIL_FAST_REASON, step=step_name)
        if status is not None:
            terminal[(run_id, step_name)] = (status, with_errors)
    return terminal


async def advance(
    conn: asyncpg.Connection,
    ended: Ended,
    locked: Locked,
    versions: VersionCache,
    *,
    noted: set[int] | None = None,
) -> dict[int, Advanced]:
    """Finish the steps that ended and advance every run they belong to, set-based; a run
    finishing under the Queue policy starts its pipeline's next queued run. Returns how each
    run advanced.

    Every ``locked`` run then notes its progress, once: a run whose row advancing wrote (or
    the caller did: ``noted``) noted it there, because a second update of a row this
    transaction wrote re-checks its foreign keys (a share lock of its pipeline's rows).
    """
    run_ids = sorted({r for r, _ in ended})
    runs = [(r, await versions.get(conn, locked[r]["version_id"])) for r in run_ids]
    advanced = await advance_runs(conn, runs, ended)
    for run_id, pipeline in runs:
        finished = advanced[run_id].run_status is not None
        if finished and pipeline.spec.concurrency is ConcurrencyPolicy.QUEUE:
            await start_queued_run(conn, locked[run_id]["pipeline_id"], versions)
    written = {r for r, a in advanced.items() if a.wrote_run} | (noted or set())
    await note_progress(conn, sorted(set(locked) - written))
    return advanced
