"""Applying step progression inside the outcome transaction.

Callers hold the run row's lock (``SELECT ... FOR NO KEY UPDATE`` on ``runs``) before calling
anything here: that lock is what makes a run's status derived exactly once when two workers
record its last two attempts at the same moment, and because it is taken before any write,
no transaction ever upgrades a share lock it took through a foreign key (the deadlock two
workers finishing at once would otherwise meet).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

import asyncpg

from dirigent.engine.rules.progression import Advance, StepState, advance, failed_step, run_outcome
from dirigent.engine.shapes.manifests import dag
from dirigent.engine.shapes.manifests.pipeline import Pipeline
from dirigent.engine.shapes.statuses import WorkStatus
from dirigent.engine.store.named import named
from dirigent.engine.store.transactions import alerts
from dirigent.engine.store.transactions.logs import INSERT_LOGS, LogRow, log_values

WORK_CHANNEL = "dirigent_work"


@dataclass
class Advanced:
    queued: int = 0  # attempts that became claimable
    run_status: str | None = None  # set when the run finished

    @property
    def wrote_run(self) -> bool:
        """Advancing updated the run's row (its fairness counter or its status), noting
        its progress there."""
        return self.queued > 0 or self.run_status is not None


async def notify_work(conn: asyncpg.Connection) -> None:
    """Wake idle workers; one NOTIFY per transaction (PostgreSQL folds duplicates anyway)."""
    await conn.execute(f"NOTIFY {WORK_CHANNEL}")


# Steps that reached their end take their status, and every step of the runs is read back,
# in one statement: the read is the post-update state (``ended`` for the steps written, the
# snapshot for the rest), as the plan needs it.
STEP_STATES = """
WITH t AS (
    SELECT * FROM unnest($2::bigint[], $3::text[], $4::text[], $5::bool[])
        AS t(run_id, step, status, with_errors)
),
ended AS (
    UPDATE run_steps s SET status = t.status, with_errors = t.with_errors, finished_at = now()
    FROM t WHERE s.run_id = t.run_id AND s.step = t.step
    RETURNING s.run_id, s.step, s.status, s.with_errors, s.items
)
SELECT * FROM ended
UNION ALL
SELECT s.run_id, s.step, s.status, s.with_errors, s.items FROM run_steps s
WHERE s.run_id = ANY($1)
  AND NOT EXISTS (SELECT 1 FROM t WHERE t.run_id = s.run_id AND t.step = s.step)
"""

Ended = Mapping[tuple[int, str], tuple[str, bool]]  # (run, step): (status, with_errors)


async def _step_states_many(
    conn: asyncpg.Connection, run_ids: list[int], ended: Ended | None = None
) -> dict[int, tuple[dict[str, StepState], dict[str, int | None]]]:
    """Every step's state and item count for many runs, after the ``ended`` steps take
    their status: one statement (a round trip fewer per outcome batch than two)."""
    out: dict[int, tuple[dict[str, StepState], dict[str, int | None]]] = {
        r: ({}, {}) for r in run_ids
    }
    ended = ended or {}
    keys = sorted(ended)  # rows locked in (run, step) order by every writer
    rows = await conn.fetch(
        STEP_STATES,
        run_ids,
        [r for r, _ in keys],
        [s for _, s in keys],
        [ended[k][0] for k in keys],
        [ended[k][1] for k in keys],
    )
    for r in rows:
        states, items = out[r["run_id"]]
        states[r["step"]] = StepState(r["status"], r["with_errors"])
        items[r["step"]] = r["items"]
    return out


def plan(pipeline: Pipeline, states: dict[str, StepState], items: dict[str, int | None]) -> Advance:
    """Steps to queue, skip and mark upstream_failed; a ready fan-out over nothing is skipped."""
    current = dict(states)
    out = Advance([], [], [])
    while True:
        step = advance(pipeline, current)
        for name in step.skipped:
            current[name] = StepState("skipped")
        for name in step.upstream_failed:
            current[name] = StepState("upstream_failed")
        out.skipped += step.skipped
        out.upstream_failed += step.upstream_failed
        empty = [n for n in step.ready if items.get(n) == 0]
        for name in step.ready:
            current[name] = StepState("skipped" if name in empty else "running")
        out.skipped += empty
        out.ready += [n for n in step.ready if n not in empty]
        if not empty:
            return out


async def next_attempts(
    conn: asyncpg.Connection,
    previous: list[int],
    *,
    kind: str,
    status: WorkStatus,
    delays: list[timedelta] | None = None,
    idempotency_key: str | None = None,
) -> list[asyncpg.Record]:
    """Each of the ``previous`` attempts gets its successor (number + 1), one statement.

    The successor copies what the claim needs from the attempt it follows (item, block,
    priority, worker tags). Queued, it is due after its delay (``delays``, one per attempt; 0
    when not given) and numbered for fairness after its run's earlier work in the order given
    (each run's counter moves past all of them at once); pending, it is neither: a step that
    starts queues it (``queue_steps_many``). Returns the new attempts' id, run_id, step,
    item_index and available_at. Automatic retry, manual retry and a reopened downstream step
    all create the next attempt here.
    """
    queued = status is WorkStatus.QUEUED
    due = delays if delays is not None else [timedelta(0) if queued else None] * len(previous)
    sql, args = named(
        """
        WITH prev AS (
            SELECT p.id, p.delay, p.ord, a.run_id
            FROM unnest(:ids::bigint[], :delays::interval[]) WITH ORDINALITY AS p(id, delay, ord)
            JOIN step_attempts a ON a.id = p.id
        ),
        n AS (SELECT run_id, count(*) AS n FROM prev GROUP BY run_id),
        seq AS (
            UPDATE runs r SET queued_seq = r.queued_seq + n.n, last_progress_at = now(), stuck_at = NULL
            FROM n WHERE r.id = n.run_id AND :fair
            RETURNING r.id, r.queued_seq - n.n AS base
        ),
        ord AS (SELECT prev.*, row_number() OVER (PARTITION BY prev.run_id ORDER BY prev.ord) AS rn
                FROM prev)
        INSERT INTO step_attempts (run_id, run_item_id, step, item_index, number, kind, status, priority,
                                   requires_workers, block, available_at, fair_seq, idempotency_key)
        SELECT a.run_id, a.run_item_id, a.step, a.item_index, a.number + 1, :kind, :status, a.priority,
               a.requires_workers, a.block, now() + ord.delay, COALESCE(seq.base + ord.rn, 0),
               :idempotency_key
        FROM ord JOIN step_attempts a ON a.id = ord.id LEFT JOIN seq ON seq.id = ord.run_id
        ORDER BY ord.ord
        RETURNING id, run_id, step, item_index, available_at
        """,
        ids=previous,
        delays=due,
        fair=queued,
        kind=kind,
        status=str(status),
        idempotency_key=idempotency_key,
    )
    return list(await conn.fetch(sql, *args))


async def queue_steps(conn: asyncpg.Connection, run_id: int, steps: list[str]) -> int:
    """Move the steps' pending attempts to queued, numbering them for fairness."""
    return (await queue_steps_many(conn, [(run_id, s) for s in steps])).get(run_id, 0)


async def queue_steps_many(
    conn: asyncpg.Connection, steps: list[tuple[int, str]]
) -> dict[int, int]:
    """Start (run, step) pairs of many runs at once; returns the attempts queued per run.

    One statement: the steps start, their pending attempts queue numbered after each run's
    earlier work (fairness: ``fair_seq`` continues the run's own counter), every run's
    counter moves past them, and idle workers are notified when anything was queued (a
    round trip fewer than a separate NOTIFY). Callers hold the runs' locks.
    """
    if not steps:
        return {}
    rows = await conn.fetch(
        f"""
        WITH t AS (SELECT * FROM unnest($1::bigint[], $2::text[]) AS t(run_id, step)),
        started AS (
            UPDATE run_steps s SET status = '{WorkStatus.RUNNING}', started_at = now()
            FROM t WHERE s.run_id = t.run_id AND s.step = t.step
        ),
        q AS (
            SELECT a.id, a.run_id,
                   row_number() OVER (PARTITION BY a.run_id ORDER BY a.item_index NULLS FIRST, a.id) AS rn
            FROM step_attempts a JOIN t ON a.run_id = t.run_id AND a.step = t.step
            WHERE a.status = '{WorkStatus.PENDING}'
        ),
        u AS (
            UPDATE step_attempts a SET status = '{WorkStatus.QUEUED}', available_at = now(),
                   fair_seq = r.queued_seq + q.rn
            FROM q JOIN runs r ON r.id = q.run_id
            WHERE a.id = q.id RETURNING a.run_id
        ),
        c AS (SELECT run_id, count(*) AS n FROM u GROUP BY run_id),
        bumped AS (
            UPDATE runs r SET queued_seq = r.queued_seq + c.n, last_progress_at = now(), stuck_at = NULL
            FROM c WHERE r.id = c.run_id
        ),
        notified AS (SELECT pg_notify('{WORK_CHANNEL}', '') FROM (SELECT 1 FROM c LIMIT 1) AS one)
        SELECT run_id, n FROM c WHERE (SELECT count(*) FROM notified) >= 0
        """,
        [r for r, _ in steps],
        [s for _, s in steps],
    )
    return {r["run_id"]: int(r["n"]) for r in rows}


async def skip_steps(
    conn: asyncpg.Connection, run_id: int, steps: list[str], status: str = "skipped"
) -> None:
    """Steps that will not run (skipped or upstream_failed); their items count as skipped."""
    await skip_steps_many(conn, [(run_id, s, status) for s in steps])


async def skip_steps_many(conn: asyncpg.Connection, steps: list[tuple[int, str, str]]) -> None:
    """(run, step, status) triples of many runs: the steps finish as the status given
    (skipped or upstream_failed), their pending items count as skipped, their pending
    attempts are skipped. Two statements whatever the number of runs."""
    if not steps:
        return
    cols = ([r for r, _, _ in steps], [s for _, s, _ in steps], [x for _, _, x in steps])
    await conn.execute(
        f"""WITH t AS (SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[]) AS t(run_id, step, status)),
           i AS (
               UPDATE run_items ri SET status = '{WorkStatus.SKIPPED}', finished_at = now()
               FROM t WHERE ri.run_id = t.run_id AND ri.step = t.step AND ri.status = '{WorkStatus.PENDING}'
               RETURNING ri.run_id, ri.step
           ),
           n AS (SELECT run_id, step, count(*) AS n FROM i GROUP BY run_id, step)
           UPDATE run_steps s SET status = t.status, finished_at = now(),
                  items_skipped = s.items_skipped + COALESCE(
                      (SELECT n FROM n WHERE n.run_id = s.run_id AND n.step = s.step), 0)
           FROM t WHERE s.run_id = t.run_id AND s.step = t.step""",
        *cols,
    )
    await conn.execute(
        f"""UPDATE step_attempts a SET status = '{WorkStatus.SKIPPED}', finished_at = now()
           FROM unnest($1::bigint[], $2::text[]) AS t(run_id, step)
           WHERE a.run_id = t.run_id AND a.step = t.step AND a.status = '{WorkStatus.PENDING}'""",
        cols[0],
        cols[1],
    )


async def advance_run(conn: asyncpg.Connection, run_id: int, pipeline: Pipeline) -> Advanced:
    """Queue what became ready, skip what became unsatisfiable, finish the run when done."""
    return (await advance_runs(conn, [(run_id, pipeline)]))[run_id]


async def advance_runs(
    conn: asyncpg.Connection, runs: list[tuple[int, Pipeline]], ended: Ended | None = None
) -> dict[int, Advanced]:
    """``advance_run`` for many runs with one statement per kind of write, not per run.

    The decisions are the pure ``plan`` per run; the writes are set-based over every run:
    finish the ``ended`` steps and read the step states, skip, mark upstream_failed, queue,
    then finish the runs that are done. Callers hold every run's lock.
    """
    if not runs:
        return {}
    states_of = await _step_states_many(conn, [r for r, _ in runs], ended)
    plans = {run_id: plan(p, *states_of[run_id]) for run_id, p in runs}
    await skip_steps_many(
        conn,
        [(r, n, "skipped") for r, pl in plans.items() for n in pl.skipped]
        + [(r, n, "upstream_failed") for r, pl in plans.items() for n in pl.upstream_failed],
    )
    queued = await queue_steps_many(conn, [(r, n) for r, pl in plans.items() for n in pl.ready])
    out: dict[int, Advanced] = {}
    finishing: list[tuple[int, Pipeline, dict[str, StepState], str]] = []
    for run_id, pipeline in runs:
        states, planned = states_of[run_id][0], plans[run_id]
        for name in planned.skipped:
            states[name] = StepState("skipped")
        for name in planned.upstream_failed:
            states[name] = StepState("upstream_failed")
        for name in planned.ready:
            states[name] = StepState("running")
        status = run_outcome(pipeline, states)
        if status is not None:
            finishing.append((run_id, pipeline, states, status))
        out[run_id] = Advanced(queued.get(run_id, 0), status)
    await finish_runs(conn, finishing)  # queue_steps_many notified the workers
    return out


async def finish_run(
    conn: asyncpg.Connection,
    run_id: int,
    pipeline: Pipeline,
    states: dict[str, StepState],
    status: str,
) -> None:
    await finish_runs(conn, [(run_id, pipeline, states, status)])


async def finish_runs(
    conn: asyncpg.Connection, finishing: list[tuple[int, Pipeline, dict[str, StepState], str]]
) -> None:
    """Runs whose every step finished take their status, a closing log line, then their
    report and alerts; the status and the line are one statement for all of them."""
    if not finishing:
        return
    failed: dict[int, str | None] = {}
    for run_id, pipeline, states, status in finishing:
        if status != "failed":  # only a failed run names its failed step
            failed[run_id] = None
            continue
        order = dag.topological_order({n: s.depends_on for n, s in pipeline.spec.steps.items()})
        failed[run_id] = failed_step(pipeline, states, order)
    errors = await _last_errors(conn, [(r, s) for r, s in failed.items() if s is not None])
    rows = [(r, status, failed[r], errors.get(r)) for r, _, _, status in finishing]
    lines = [
        LogRow(
            run_id,
            "error" if status == "failed" else "info",
            f"run {status}",
            {"status": status, **({"failed_step": step} if step else {})},
        )
        for run_id, status, step, _ in rows
    ]
    sql, args = named(
        f"""WITH finished AS (
               UPDATE runs r SET status = t.status, finished_at = now(), last_progress_at = now(),
                      stuck_at = NULL, failed_step = t.failed,
                      error_message = COALESCE(r.error_message, t.error)
               FROM unnest(:ids::bigint[], :statuses::text[], :failed::text[], :errors::text[])
                    AS t(id, status, failed, error)
               WHERE r.id = t.id
           )
           {INSERT_LOGS}""",
        ids=[r for r, _, _, _ in rows],
        statuses=[s for _, s, _, _ in rows],
        failed=[f for _, _, f, _ in rows],
        errors=[e for _, _, _, e in rows],
        **log_values(lines),
    )
    await conn.execute(sql, *args)
    for run_id, pipeline, _, status in finishing:
        await alerts.on_finished(conn, run_id, pipeline, status)


async def _last_errors(conn: asyncpg.Connection, steps: list[tuple[int, str]]) -> dict[int, str]:
    """The latest failed attempt's message of each (run, failed step)."""
    if not steps:
        return {}
    rows = await conn.fetch(
        f"""SELECT DISTINCT ON (a.run_id) a.run_id, a.error_message
           FROM step_attempts a
           JOIN unnest($1::bigint[], $2::text[]) AS t(run_id, step)
             ON a.run_id = t.run_id AND a.step = t.step
           WHERE a.status = '{WorkStatus.FAILED}'
           ORDER BY a.run_id, a.id DESC""",
        [r for r, _ in steps],
        [s for _, s in steps],
    )
    return {r["run_id"]: r["error_message"] for r in rows}
