"""Runs: creation (version pinned, params checked, fan-out drawn, concurrency applied) and
cancellation, each one transaction.

A run is rows from the moment it exists: its steps (``run_steps``), its fan-out grid
(``run_items``) and one pending attempt per step or item are inserted by ``create_run``, so
the grid is visible at once and nothing about the run lives in any process's memory.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from dirigent.engine.infrastructure.plugins import Catalog
from dirigent.engine.rules.params import resolve_params
from dirigent.engine.rules.resolving import Scope, UnresolvedReference, resolve
from dirigent.engine.shapes.manifests import dag
from dirigent.engine.shapes.manifests.enums import ConcurrencyPolicy, Priority
from dirigent.engine.shapes.manifests.pipeline import Pipeline
from dirigent.engine.shapes.problems import Problem, ProblemsError, problem
from dirigent.engine.shapes.statuses import ATTEMPT_TERMINAL, WORK_TERMINAL, RunStatus, WorkStatus
from dirigent.engine.store.leases import ATTEMPTS, REMOTE_CANCELS
from dirigent.engine.store.named import named
from dirigent.engine.store.transactions.logs import log_run
from dirigent.engine.store.transactions.progress import advance_run, notify_work
from dirigent.engine.store.transactions.versions import VersionCache

IN_FLIGHT = (RunStatus.QUEUED, RunStatus.RUNNING)


def _sql_list(statuses: Collection[str]) -> str:
    return ", ".join(f"'{s}'" for s in statuses)


_OPEN = (WorkStatus.PENDING, WorkStatus.QUEUED, WorkStatus.WAITING, WorkStatus.RUNNING)
_TERMINAL_STEP = _sql_list(tuple(WORK_TERMINAL))
_TERMINAL_ATTEMPT = _sql_list(ATTEMPT_TERMINAL)


@dataclass(frozen=True)
class RunRequest:
    namespace: str
    pipeline: str
    params: dict[str, Any] = field(default_factory=dict)
    triggered_by_kind: str = "api"
    triggered_by_ref: str | None = None
    priority: Priority | None = None
    window: tuple[datetime, datetime] | None = None
    idempotency_key: str | None = None
    parent_run_id: int | None = None


@dataclass(frozen=True)
class RunCreated:
    run_id: int
    status: str  # running | queued (| a terminal status when nothing could run)
    created: bool = True  # False when the idempotency key found an existing run
    replaced: tuple[int, ...] = ()


def _gate(
    pipeline: Pipeline, catalog: Catalog | None, enabled_unsafe: Collection[str]
) -> list[Problem]:
    if catalog is None:
        return []
    out: list[Problem] = []
    for name, step in pipeline.spec.steps.items():
        entry = catalog.block(step.block)
        if entry is None:
            out.append(
                problem(
                    "run.block.unknown",
                    f"block '{step.block}' is not installed",
                    "spec",
                    "steps",
                    name,
                    "block",
                )
            )
        elif entry.local_execution and step.block not in enabled_unsafe:
            out.append(
                problem(
                    "run.block.unsafe_disabled",
                    f"block '{step.block}' executes code on workers and is not enabled "
                    "(DIRIGENT_ENABLED_UNSAFE_BLOCKS)",
                    "spec",
                    "steps",
                    name,
                    "block",
                )
            )
    return out


def _grids(pipeline: Pipeline, scope: Scope) -> tuple[dict[str, list[Any]], list[Problem]]:
    """Every fan-out step's items, drawn now so the grid exists from the run's first moment."""
    grids: dict[str, list[Any]] = {}
    problems: list[Problem] = []
    order = dag.topological_order({n: s.depends_on for n, s in pipeline.spec.steps.items()})
    for name in order:
        step = pipeline.spec.steps[name]
        if step.for_each is None:
            continue
        scope.grids = grids
        try:
            value = resolve(step.for_each, scope)
        except UnresolvedReference as err:
            problems.append(
                problem("run.for_each.unresolved", str(err), "spec", "steps", name, "forEach")
            )
            continue
        if not isinstance(value, list):
            problems.append(
                problem(
                    "run.for_each.not_a_list",
                    f"forEach of step '{name}' must produce a list, got {type(value).__name__}",
                    "spec",
                    "steps",
                    name,
                    "forEach",
                )
            )
            continue
        grids[name] = value
    return grids, problems


async def create_run(
    conn: asyncpg.Connection,
    request: RunRequest,
    *,
    versions: VersionCache,
    catalog: Catalog | None = None,
    enabled_unsafe: Collection[str] = (),
) -> RunCreated:
    """Create a run of the pipeline's current version. Call inside a transaction.

    Raises ProblemsError when the pipeline is missing or inactive, the params do not fit,
    a block is missing or gated, or the concurrency policy refuses (Skip).
    """
    prow = await _lock_pipeline(conn, request)
    if request.idempotency_key is not None:
        existing = await conn.fetchrow(
            "SELECT id, status FROM runs WHERE pipeline_id = $1 AND idempotency_key = $2",
            prow["id"],
            request.idempotency_key,
        )
        if existing is not None:
            return RunCreated(existing["id"], existing["status"], created=False)
    pipeline = await versions.get(conn, prow["current_version_id"])
    params, problems = resolve_params(pipeline.spec.params, request.params)
    problems += _gate(pipeline, catalog, enabled_unsafe)
    if problems:
        raise ProblemsError(problems)
    status, replaced = await _admit(conn, request, prow["id"], pipeline, versions)
    priority = (request.priority or pipeline.spec.priority).rank
    requires = list(pipeline.spec.requires.workers) if pipeline.spec.requires else []
    run_id = await _insert_run(
        conn, request, prow, status=status, params=params, priority=priority, requires=requires
    )
    scope = Scope(params=params, run_id=run_id, scratch="", artifacts="", window=request.window)
    grids, problems = _grids(pipeline, scope)
    if problems:
        raise ProblemsError(problems)
    await _insert_work(conn, run_id, pipeline, grids, priority=priority, requires=requires)
    await log_run(
        conn,
        run_id,
        "info",
        f"run created ({request.triggered_by_kind})"
        + (", queued behind a run in flight" if status == RunStatus.QUEUED else ""),
        {"pipeline": request.pipeline, "version_id": prow["current_version_id"]},
    )
    if status == RunStatus.RUNNING:
        advanced = await advance_run(conn, run_id, pipeline)
        if advanced.run_status is not None:
            status = advanced.run_status
    return RunCreated(run_id, status, replaced=replaced)


async def create_runs(
    conn: asyncpg.Connection,
    requests: list[RunRequest],
    *,
    versions: VersionCache,
    catalog: Catalog | None = None,
    enabled_unsafe: Collection[str] = (),
) -> list[RunCreated]:
    """``create_run`` for many requests in the caller's transaction (all visible at once).

    Plans are made per execution here (``plan_cache_mode``, for this transaction only): the
    tables grow by thousands of rows inside a transaction no ANALYZE can see, and a generic
    plan chosen while they were small (a sequential scan of ``run_steps`` and
    ``step_attempts`` per run) made creating N runs cost N² row reads.
    """
    await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
    return [
        await create_run(conn, r, versions=versions, catalog=catalog, enabled_unsafe=enabled_unsafe)
        for r in requests
    ]


async def _lock_pipeline(conn: asyncpg.Connection, request: RunRequest) -> asyncpg.Record:
    """The pipeline's row, locked for this run's creation; refused when missing or inactive."""
    prow = await conn.fetchrow(
        "SELECT id, active, current_version_id FROM pipelines WHERE namespace = $1 AND name = $2 FOR UPDATE",
        request.namespace,
        request.pipeline,
    )
    if prow is None or prow["current_version_id"] is None:
        raise ProblemsError(
            [
                problem(
                    "run.pipeline.not_found",
                    f"pipeline '{request.pipeline}' does not exist in namespace "
                    f"'{request.namespace}'",
                    "pipeline",
                )
            ]
        )
    if not prow["active"]:
        raise ProblemsError(
            [
                problem(
                    "run.pipeline.inactive",
                    f"pipeline '{request.pipeline}' is deactivated; apply or activate it first",
                    "pipeline",
                )
            ]
        )
    return prow


async def _admit(
    conn: asyncpg.Connection,
    request: RunRequest,
    pipeline_id: int,
    pipeline: Pipeline,
    versions: VersionCache,
) -> tuple[str, tuple[int, ...]]:
    """The concurrency policy against the runs in flight: the new run's status, and the runs
    it replaced (Replace); Skip refuses with a Problem.

    Allow reads nothing, Skip and Queue read at most one run in flight, and only Replace
    reads them all: ``start_runs`` creates thousands of runs of one pipeline in one
    transaction, and reading every run in flight for each new one made that quadratic.
    """
    policy = pipeline.spec.concurrency
    if policy is ConcurrencyPolicy.ALLOW:
        return RunStatus.RUNNING.value, ()
    in_flight = [
        r["id"]
        for r in await conn.fetch(
            f"""SELECT id FROM runs WHERE pipeline_id = $1
                AND status IN ('{RunStatus.QUEUED}', '{RunStatus.RUNNING}') ORDER BY id
                LIMIT $2""",
            pipeline_id,
            None if policy is ConcurrencyPolicy.REPLACE else 1,
        )
    ]
    if not in_flight:
        return RunStatus.RUNNING.value, ()
    if policy is ConcurrencyPolicy.SKIP:
        raise ProblemsError(
            [
                problem(
                    "run.concurrency.skipped",
                    f"pipeline '{request.pipeline}' allows one run at a time (concurrency: Skip) "
                    f"and run {in_flight[0]} is in flight",
                    "pipeline",
                    in_flight=in_flight[0],
                )
            ]
        )
    if policy is ConcurrencyPolicy.QUEUE:
        return RunStatus.QUEUED.value, ()
    for rid in in_flight:  # Replace
        await cancel_run(conn, rid, reason="replaced by a newer run", versions=versions)
    return RunStatus.RUNNING.value, tuple(in_flight)


async def _insert_run(
    conn: asyncpg.Connection,
    request: RunRequest,
    prow: asyncpg.Record,
    *,
    status: str,
    params: dict[str, Any],
    priority: int,
    requires: list[str],
) -> int:
    window = request.window
    sql, args = named(
        f"""
        INSERT INTO runs (namespace, pipeline_id, version_id, status, params, priority,
                          requires_workers, triggered_by_kind, triggered_by_ref, parent_run_id,
                          window_start, window_end, started_at, last_progress_at, idempotency_key)
        VALUES (:namespace, :pipeline_id, :version_id, :status::text, :params, :priority,
                :requires, :triggered_by_kind, :triggered_by_ref, :parent_run_id,
                :window_start, :window_end,
                CASE WHEN :status::text = '{RunStatus.RUNNING}' THEN now() END, now(),
                :idempotency_key)
        RETURNING id
        """,
        namespace=request.namespace,
        pipeline_id=prow["id"],
        version_id=prow["current_version_id"],
        status=status,
        params=params,
        priority=priority,
        requires=requires,
        triggered_by_kind=request.triggered_by_kind,
        triggered_by_ref=request.triggered_by_ref,
        parent_run_id=request.parent_run_id,
        window_start=window[0] if window else None,
        window_end=window[1] if window else None,
        idempotency_key=request.idempotency_key,
    )
    run_id: int = await conn.fetchval(sql, *args)
    return run_id


async def _insert_work(
    conn: asyncpg.Connection,
    run_id: int,
    pipeline: Pipeline,
    grids: dict[str, list[Any]],
    *,
    priority: int,
    requires: list[str],
) -> None:
    """The run's steps, its fan-out grids, and one pending attempt per step or item."""
    names = list(pipeline.spec.steps)
    await conn.execute(
        """INSERT INTO run_steps (run_id, step, items)
           SELECT $1, s, NULLIF(n, -1) FROM unnest($2::text[], $3::int[]) AS t(s, n)""",
        run_id,
        names,
        [len(grids[n]) if n in grids else -1 for n in names],
    )
    plain = [n for n in names if n not in grids]
    sql, args = named(
        f"""INSERT INTO step_attempts (run_id, step, number, kind, status, priority,
                                       requires_workers, block)
           SELECT :run_id, s, 1, 'automatic', '{WorkStatus.PENDING}', :priority, :requires, b
           FROM unnest(:steps::text[], :blocks::text[]) AS t(s, b)""",
        run_id=run_id,
        steps=plain,
        priority=priority,
        requires=requires,
        blocks=[pipeline.spec.steps[n].block for n in plain],
    )
    await conn.execute(sql, *args)
    for name, items in grids.items():
        if not items:
            continue
        sql, args = named(
            f"""
            WITH items AS (
                INSERT INTO run_items (run_id, step, index, value)
                SELECT :run_id, :step, i - 1, v::jsonb
                FROM unnest(:values::text[]) WITH ORDINALITY AS t(v, i)
                RETURNING id, index
            )
            INSERT INTO step_attempts (run_id, run_item_id, step, item_index, number, kind, status,
                                       priority, requires_workers, block)
            SELECT :run_id, id, :step, index, 1, 'automatic', '{WorkStatus.PENDING}', :priority,
                   :requires, :block
            FROM items
            """,
            run_id=run_id,
            step=name,
            values=[json.dumps(v) for v in items],
            priority=priority,
            requires=requires,
            block=pipeline.spec.steps[name].block,
        )
        await conn.execute(sql, *args)


async def start_queued_run(
    conn: asyncpg.Connection, pipeline_id: int, versions: VersionCache
) -> int | None:
    """Start the oldest queued run of a pipeline when none is running (concurrency: Queue).

    The pipeline row is locked first, as ``create_run`` locks it, so two sweepers (or a
    sweeper and a finishing run) never both read "nothing running" and start two runs. A run
    that finishes the moment it starts (nothing to do) hands over to the next at once.
    Returns the run left running, if any.
    """
    await conn.execute("SELECT 1 FROM pipelines WHERE id = $1 FOR NO KEY UPDATE", pipeline_id)
    while True:
        running = await conn.fetchval(
            f"SELECT 1 FROM runs WHERE pipeline_id = $1 AND status = '{RunStatus.RUNNING}' LIMIT 1",
            pipeline_id,
        )
        if running:
            return None
        row = await conn.fetchrow(
            f"""SELECT id, version_id FROM runs WHERE pipeline_id = $1 AND status = '{RunStatus.QUEUED}'
               ORDER BY id LIMIT 1 FOR NO KEY UPDATE""",
            pipeline_id,
        )
        if row is None:
            return None
        await conn.execute(
            f"UPDATE runs SET status = '{RunStatus.RUNNING}', started_at = now(), last_progress_at = now() WHERE id = $1",
            row["id"],
        )
        advanced = await advance_run(conn, row["id"], await versions.get(conn, row["version_id"]))
        if advanced.run_status is None:
            return int(row["id"])


async def cancel_run(
    conn: asyncpg.Connection, run_id: int, *, reason: str, versions: VersionCache
) -> list[dict[str, Any]]:
    """Cancel a run in one transaction; returns the remote handles to cancel best-effort.

    Queued, pending, waiting and running attempts become cancelled; a worker holding one
    finds its lease gone when it records and discards its result.
    """
    # Lock order, as everywhere: the pipeline row, then the run row.
    await conn.execute(
        """SELECT 1 FROM pipelines WHERE id = (SELECT pipeline_id FROM runs WHERE id = $1)
           FOR NO KEY UPDATE""",
        run_id,
    )
    row = await conn.fetchrow(
        "SELECT status, pipeline_id FROM runs WHERE id = $1 FOR NO KEY UPDATE", run_id
    )
    if row is None:
        raise ProblemsError([problem("run.not_found", f"run {run_id} does not exist", "run")])
    if row["status"] not in IN_FLIGHT:
        return []
    handles = await cancel_open_work(conn, run_id, reason)
    await conn.execute(
        f"""UPDATE run_steps SET status = '{WorkStatus.CANCELLED}', finished_at = now()
           WHERE run_id = $1 AND status NOT IN ({_TERMINAL_STEP})""",
        run_id,
    )
    await conn.execute(
        f"""UPDATE runs SET status = '{RunStatus.CANCELLED}', finished_at = now(), last_progress_at = now(),
                  error_message = $2 WHERE id = $1""",
        run_id,
        reason,
    )
    await log_run(conn, run_id, "warning", f"run cancelled: {reason}", {"reason": reason})
    await start_queued_run(conn, row["pipeline_id"], versions)
    await notify_work(conn)
    return [dict(h) for h in handles if h["handle"] is not None]


async def cancel_open_work(
    conn: asyncpg.Connection, run_id: int, reason: str, *, step: str | None = None
) -> list[asyncpg.Record]:
    """Cancel a run's open attempts and items (only ``step``'s, when given): run cancel,
    Replace, and FailFast all stop work through here.

    Attempts are locked in id order, as every writer locks them; a worker holding one finds
    its lease gone when it records and discards its result. The cancelled items are counted
    on their steps, so a manual retry that reopens them finds the counters equal to the rows.
    Returns the attempts cancelled (id, block, step, handle, input): one holding a remote
    handle is in the cancel outbox (``take_owed_remote_cancels``) from this commit on.
    """
    only_step = "" if step is None else "AND step = :step"
    values: dict[str, Any] = {"run_id": run_id} | ({} if step is None else {"step": step})
    sql, args = named(
        f"""WITH l AS (SELECT id FROM step_attempts
                      WHERE run_id = :run_id {only_step} AND status IN ({_sql_list(_OPEN)})
                      ORDER BY id FOR NO KEY UPDATE)
           UPDATE step_attempts a SET status = '{WorkStatus.CANCELLED}', finished_at = now(),
                  {ATTEMPTS.release()}, error_message = :reason
           FROM l WHERE a.id = l.id
           RETURNING a.id, a.block, a.step, a.handle, a.input""",
        reason=reason,
        **values,
    )
    cancelled = await conn.fetch(sql, *args)
    sql, args = named(
        f"""WITH c AS (
               UPDATE run_items SET status = '{WorkStatus.CANCELLED}', finished_at = now()
               WHERE run_id = :run_id {only_step} AND status NOT IN ({_TERMINAL_ATTEMPT})
               RETURNING step
           ),
           n AS (SELECT step, count(*) AS n FROM c GROUP BY step)
           UPDATE run_steps s SET items_cancelled = s.items_cancelled + n.n
           FROM n WHERE s.run_id = :run_id AND s.step = n.step""",
        **values,
    )
    await conn.execute(sql, *args)
    return list(cancelled)


async def take_owed_remote_cancels(
    conn: asyncpg.Connection,
    *,
    run_id: int | None = None,
    limit: int = 100,
    first_backoff: float = 1.0,
) -> list[dict[str, Any]]:
    """Cancelled attempts holding a remote handle nobody has told yet, taken on a lease.

    Every path that cancels an attempt (a run cancelled or replaced, FailFast, a cancel that
    raced a submit) leaves its handle here; the canceller and every worker's sweeper drain it.
    Taking counts a try and pushes the due time out (``first_backoff`` seconds, doubling per
    try, at most 5 minutes), so a try that failed, or whose taker died before telling, is taken
    again then: a remote job is told even when the process that cancelled it died first.
    ``told_remote_cancel`` ends the debt.

    The canceller (``run_id`` given) waits for a row another transaction holds: that is the
    worker that was probing the attempt, writing a result it will discard, and skipping the
    row would leave the remote to the next sweep. Sweepers skip it and move on.
    """
    lock = "FOR UPDATE" if run_id is not None else "FOR UPDATE SKIP LOCKED"
    rows = await conn.fetch(
        f"""
        WITH owed AS (
            SELECT id FROM step_attempts
            WHERE status = '{WorkStatus.CANCELLED}' AND handle IS NOT NULL
              AND remote_cancelled_at IS NULL
              AND {REMOTE_CANCELS.due_now()}
              AND ($1::bigint IS NULL OR run_id = $1)
            ORDER BY id LIMIT $2 {lock}
        ),
        taken AS (
            UPDATE step_attempts a
            SET {REMOTE_CANCELS.take("$3", "a.")}
            FROM owed WHERE a.id = owed.id
            RETURNING a.id, a.run_id, a.run_item_id, a.step, a.block, a.handle, a.input,
                      a.item_index, a.{REMOTE_CANCELS.tries} AS tries
        )
        SELECT t.*, r.namespace, p.name AS pipeline
        FROM taken t JOIN runs r ON r.id = t.run_id JOIN pipelines p ON p.id = r.pipeline_id
        ORDER BY t.id
        """,
        run_id,
        limit,
        first_backoff,
    )
    return [dict(r) for r in rows]


async def told_remote_cancel(conn: asyncpg.Connection, attempt_id: int) -> None:
    """The remote accepted the cancel, or the last try was spent: nothing is owed any more."""
    await conn.execute(
        f"UPDATE step_attempts SET remote_cancelled_at = now(), {REMOTE_CANCELS.release()} "
        "WHERE id = $1",
        attempt_id,
    )
