"""Applying step progression inside the outcome transaction.

Callers hold the run row's lock (``SELECT ... FOR NO KEY UPDATE`` on ``runs``) before calling
anything here: that lock is what makes a run's status derived exactly once when two workers
settle its last two attempts at the same moment, and because it is taken before any write,
no transaction ever upgrades a share lock it took through a foreign key (the deadlock two
workers finishing at once would otherwise meet).
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from dirigent.engine.manifests import dag
from dirigent.engine.manifests.pipeline import Pipeline
from dirigent.engine.progression import Advance, StepState, advance, failed_step, run_outcome
from dirigent.engine.store import alerts

WORK_CHANNEL = "dirigent_work"


@dataclass
class Advanced:
    queued: int = 0  # attempts that became claimable
    run_status: str | None = None  # set when the run settled


async def notify_work(conn: asyncpg.Connection) -> None:
    """Wake idle workers; one NOTIFY per transaction (PostgreSQL folds duplicates anyway)."""
    await conn.execute(f"NOTIFY {WORK_CHANNEL}")


async def step_states(
    conn: asyncpg.Connection, run_id: int
) -> tuple[dict[str, StepState], dict[str, int | None]]:
    rows = await conn.fetch(
        "SELECT step, status, with_errors, items FROM run_steps WHERE run_id = $1", run_id
    )
    states = {r["step"]: StepState(r["status"], r["with_errors"]) for r in rows}
    items = {r["step"]: r["items"] for r in rows}
    return states, items


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


async def queue_steps(conn: asyncpg.Connection, run_id: int, steps: list[str]) -> int:
    """Move the steps' pending attempts to queued, numbering them for fairness."""
    if not steps:
        return 0
    # One statement: the steps start, their attempts queue numbered after the run's earlier
    # work (fairness), and the run's counter moves past them.
    count: int = await conn.fetchval(
        """
        WITH started AS (
            UPDATE run_steps SET status = 'running', started_at = now() WHERE run_id = $1 AND step = ANY($2)
        ),
        seq AS (SELECT queued_seq FROM runs WHERE id = $1),
        q AS (
            SELECT id, row_number() OVER (ORDER BY item_index NULLS FIRST, id) AS rn
            FROM step_attempts WHERE run_id = $1 AND step = ANY($2) AND status = 'pending'
        ),
        u AS (
            UPDATE step_attempts a SET status = 'queued', available_at = now(),
                   fair_seq = (SELECT queued_seq FROM seq) + q.rn
            FROM q WHERE a.id = q.id RETURNING 1
        ),
        c AS (SELECT count(*) AS n FROM u),
        bumped AS (UPDATE runs SET queued_seq = queued_seq + (SELECT n FROM c) WHERE id = $1)
        SELECT n FROM c
        """,
        run_id,
        steps,
    )
    return count


async def skip_steps(
    conn: asyncpg.Connection, run_id: int, steps: list[str], status: str = "skipped"
) -> None:
    """Steps that will not run (skipped or upstream_failed); their items count as skipped."""
    if not steps:
        return
    await conn.execute(
        """WITH i AS (
               UPDATE run_items SET status = 'skipped', finished_at = now()
               WHERE run_id = $1 AND step = ANY($2) AND status = 'pending' RETURNING step
           ),
           n AS (SELECT step, count(*) AS n FROM i GROUP BY step)
           UPDATE run_steps s SET status = $3, finished_at = now(),
                  items_skipped = s.items_skipped + COALESCE((SELECT n FROM n WHERE n.step = s.step), 0)
           WHERE s.run_id = $1 AND s.step = ANY($2)""",
        run_id,
        steps,
        status,
    )
    await conn.execute(
        """UPDATE step_attempts SET status = 'skipped', finished_at = now()
           WHERE run_id = $1 AND step = ANY($2) AND status = 'pending'""",
        run_id,
        steps,
    )


async def advance_run(conn: asyncpg.Connection, run_id: int, pipeline: Pipeline) -> Advanced:
    """Queue what became ready, skip what became unsatisfiable, settle the run when done."""
    states, items = await step_states(conn, run_id)
    planned = plan(pipeline, states, items)
    await skip_steps(conn, run_id, planned.skipped)
    await skip_steps(conn, run_id, planned.upstream_failed, "upstream_failed")
    queued = await queue_steps(conn, run_id, planned.ready)
    for name in planned.skipped:
        states[name] = StepState("skipped")
    for name in planned.upstream_failed:
        states[name] = StepState("upstream_failed")
    for name in planned.ready:
        states[name] = StepState("running")
    status = run_outcome(pipeline, states)
    if status is not None:
        await settle_run(conn, run_id, pipeline, states, status)
    if queued:
        await notify_work(conn)
    return Advanced(queued, status)


async def settle_run(
    conn: asyncpg.Connection,
    run_id: int,
    pipeline: Pipeline,
    states: dict[str, StepState],
    status: str,
) -> None:
    order = dag.topological_order({n: s.depends_on for n, s in pipeline.spec.steps.items()})
    failed = failed_step(pipeline, states, order)
    error: str | None = None
    if failed is not None:
        error = await conn.fetchval(
            """SELECT error_message FROM step_attempts WHERE run_id = $1 AND step = $2 AND status = 'failed'
               ORDER BY id DESC LIMIT 1""",
            run_id,
            failed,
        )
    await conn.execute(
        """UPDATE runs SET status = $2, finished_at = now(), last_progress_at = now(),
                  failed_step = $3, error_message = COALESCE(error_message, $4)
           WHERE id = $1""",
        run_id,
        status,
        failed,
        error,
    )
    await conn.execute(
        "INSERT INTO log_entries (run_id, level, message, fields) VALUES ($1, $2, $3, $4)",
        run_id,
        "error" if status == "failed" else "info",
        f"run {status}",
        {"status": status, **({"failed_step": failed} if failed else {})},
    )
    await alerts.on_settled(conn, run_id, pipeline, status)
