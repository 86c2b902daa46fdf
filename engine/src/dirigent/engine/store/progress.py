"""Applying step progression inside the outcome transaction.

Callers hold the run row's lock (``SELECT ... FOR UPDATE`` on ``runs``) before calling
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
from dirigent.engine.progression import StepState, advance, run_outcome

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


def plan(
    pipeline: Pipeline, states: dict[str, StepState], items: dict[str, int | None]
) -> tuple[list[str], list[str]]:
    """Steps to queue and to skip; a ready fan-out over nothing is skipped, and that propagates."""
    current = dict(states)
    to_queue: list[str] = []
    to_skip: list[str] = []
    while True:
        ready, skipped = advance(pipeline, current)
        for name in skipped:
            current[name] = StepState("skipped")
        to_skip += skipped
        empty = [n for n in ready if items.get(n) == 0]
        for name in ready:
            current[name] = StepState("skipped" if name in empty else "running")
        to_skip += empty
        to_queue += [n for n in ready if n not in empty]
        if not empty:
            return to_queue, to_skip


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


async def skip_steps(conn: asyncpg.Connection, run_id: int, steps: list[str]) -> None:
    if not steps:
        return
    await conn.execute(
        "UPDATE run_steps SET status = 'skipped', finished_at = now() WHERE run_id = $1 AND step = ANY($2)",
        run_id,
        steps,
    )
    await conn.execute(
        """UPDATE step_attempts SET status = 'skipped', finished_at = now()
           WHERE run_id = $1 AND step = ANY($2) AND status = 'pending'""",
        run_id,
        steps,
    )
    await conn.execute(
        """UPDATE run_items SET status = 'skipped', finished_at = now()
           WHERE run_id = $1 AND step = ANY($2) AND status = 'pending'""",
        run_id,
        steps,
    )


async def advance_run(conn: asyncpg.Connection, run_id: int, pipeline: Pipeline) -> Advanced:
    """Queue what became ready, skip what became unsatisfiable, settle the run when done."""
    states, items = await step_states(conn, run_id)
    to_queue, to_skip = plan(pipeline, states, items)
    await skip_steps(conn, run_id, to_skip)
    queued = await queue_steps(conn, run_id, to_queue)
    for name in to_skip:
        states[name] = StepState("skipped")
    for name in to_queue:
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
    failed_step = next((n for n in order if states[n].status == "failed"), None)
    error: str | None = None
    if failed_step is not None:
        error = await conn.fetchval(
            """SELECT error_message FROM step_attempts WHERE run_id = $1 AND step = $2 AND status = 'failed'
               ORDER BY id DESC LIMIT 1""",
            run_id,
            failed_step,
        )
    await conn.execute(
        """UPDATE runs SET status = $2, finished_at = now(), last_progress_at = now(),
                  failed_step = $3, error_message = COALESCE(error_message, $4)
           WHERE id = $1""",
        run_id,
        status,
        failed_step,
        error,
    )
    await conn.execute(
        "INSERT INTO log_entries (run_id, level, message, fields) VALUES ($1, $2, $3, $4)",
        run_id,
        "error" if status == "failed" else "info",
        f"run {status}",
        {"status": status, **({"failed_step": failed_step} if failed_step else {})},
    )
