"""Manual retry: one more try of a failed step, or of exactly the failed items of a fan-out.

Resuming starts from the failure, never from scratch: successful steps keep their attempts
and outputs (the retry reads them like any attempt does), and steps that were skipped only
because of this failure become pending again, so the branch carries on if the retry
succeeds. A manual attempt is never retried automatically — a person asked for exactly one
more try — and the idempotency key (per run, matched exactly) makes a repeated request
return the same attempts; the same key for another step of the run is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from dirigent.engine.shapes.manifests import dag
from dirigent.engine.shapes.manifests.pipeline import Pipeline
from dirigent.engine.shapes.problems import ProblemsError, problem
from dirigent.engine.shapes.statuses import RunStatus, WorkStatus
from dirigent.engine.store.named import named
from dirigent.engine.store.transactions.logs import log_run
from dirigent.engine.store.transactions.progress import next_attempts, notify_work
from dirigent.engine.store.transactions.versions import VersionCache


@dataclass(frozen=True)
class ManualRetry:
    attempt_ids: tuple[int, ...]
    created: bool  # False when the idempotency key found an earlier request


async def retry_step(
    conn: asyncpg.Connection,
    run_id: int,
    step: str,
    *,
    idempotency_key: str,
    versions: VersionCache,
) -> ManualRetry:
    """Queue manual attempts for a failed step (or its failed items). Call inside a transaction."""
    if not idempotency_key:
        raise ProblemsError(
            [
                problem(
                    "retry.idempotency_key.missing",
                    "an idempotency key is required",
                    "idempotencyKey",
                )
            ]
        )
    run = await conn.fetchrow(
        "SELECT status, version_id FROM runs WHERE id = $1 FOR NO KEY UPDATE", run_id
    )
    if run is None:
        raise ProblemsError([problem("run.not_found", f"run {run_id} does not exist", "run")])
    earlier = await _earlier_request(conn, run_id, step, idempotency_key)
    if earlier is not None:
        return earlier
    if run["status"] == RunStatus.CANCELLED:
        raise ProblemsError(
            [problem("retry.run.cancelled", f"run {run_id} was cancelled; start a new run", "run")]
        )
    pipeline = await versions.get(conn, run["version_id"])
    fan_out = await _retryable(conn, run_id, step, pipeline)
    ids, targets = await _queue_manual_attempts(conn, run_id, step, fan_out, idempotency_key)
    await _reopen_step(conn, run_id, step, fan_out)
    reopened = await _reopen_downstream(conn, run_id, step, pipeline)
    await conn.execute(
        f"""UPDATE runs SET status = '{RunStatus.RUNNING}', finished_at = NULL, failed_step = NULL,
                  error_message = NULL, last_progress_at = now(), stuck_at = NULL WHERE id = $1""",
        run_id,
    )
    await log_run(
        conn,
        run_id,
        "info",
        f"manual retry of step {step}" + (f" ({targets} items)" if fan_out else ""),
        {"attempts": len(ids), "reopened": reopened},
        step=step,
    )
    await notify_work(conn)
    return ManualRetry(ids, created=True)


async def _earlier_request(
    conn: asyncpg.Connection, run_id: int, step: str, idempotency_key: str
) -> ManualRetry | None:
    """The attempts an earlier request with this key queued; refused if it named another step."""
    earlier = await conn.fetch(
        "SELECT id, step FROM step_attempts WHERE run_id = $1 AND idempotency_key = $2 ORDER BY id",
        run_id,
        idempotency_key,
    )
    if not earlier:
        return None
    if any(r["step"] != step for r in earlier):
        raise ProblemsError(
            [
                problem(
                    "retry.idempotency_key.reused",
                    f"idempotency key '{idempotency_key}' already retried step "
                    f"'{earlier[0]['step']}' of run {run_id}; use a new key for another step",
                    "idempotencyKey",
                )
            ]
        )
    return ManualRetry(tuple(r["id"] for r in earlier), created=False)


async def _retryable(conn: asyncpg.Connection, run_id: int, step: str, pipeline: Pipeline) -> bool:
    """Refuse an unknown or unfailed step; returns whether the step is a fan-out."""
    if step not in pipeline.spec.steps:
        raise ProblemsError(
            [problem("retry.step.unknown", f"run {run_id} has no step '{step}'", "step")]
        )
    state = await conn.fetchrow(
        "SELECT status, items, items_failed FROM run_steps WHERE run_id = $1 AND step = $2",
        run_id,
        step,
    )
    fan_out: bool = state["items"] is not None
    retryable = state["status"] == WorkStatus.FAILED or (
        fan_out and state["status"] == WorkStatus.SUCCEEDED and state["items_failed"]
    )
    if not retryable:
        raise ProblemsError(
            [
                problem(
                    "retry.step.not_failed",
                    f"step '{step}' is {state['status']}: only a failed step, or a fan-out "
                    "with failed items, can be retried",
                    "step",
                )
            ]
        )
    return fan_out


async def _queue_manual_attempts(
    conn: asyncpg.Connection, run_id: int, step: str, fan_out: bool, idempotency_key: str
) -> tuple[tuple[int, ...], int]:
    """One queued manual attempt per target; returns their ids and how many targets there were.

    The work to redo: the step itself, or its failed items (and, under FailFast, the items
    the failure cancelled before they ran).
    """
    targets = await conn.fetch(
        f"""SELECT DISTINCT ON (item_index) id
           FROM step_attempts WHERE run_id = $1 AND step = $2
             AND ($3 = false OR run_item_id IN (SELECT id FROM run_items WHERE run_id = $1 AND step = $2
                                                AND status IN ('{WorkStatus.FAILED}', '{WorkStatus.CANCELLED}')))
           ORDER BY item_index, number DESC""",
        run_id,
        step,
        fan_out,
    )
    created = await next_attempts(
        conn,
        [t["id"] for t in targets],
        kind="manual",
        status=WorkStatus.QUEUED,
        idempotency_key=idempotency_key,
    )
    return tuple(r["id"] for r in created), len(targets)


async def _reopen_step(conn: asyncpg.Connection, run_id: int, step: str, fan_out: bool) -> None:
    """The retried step runs again; a fan-out's failed and cancelled items are queued again and
    its counters give them back."""
    if not fan_out:
        await conn.execute(
            f"""UPDATE run_steps SET status = '{WorkStatus.RUNNING}', finished_at = NULL
               WHERE run_id = $1 AND step = $2""",
            run_id,
            step,
        )
        return
    counts = await conn.fetchrow(
        f"""WITH old AS (SELECT id, status FROM run_items
                        WHERE run_id = $1 AND step = $2 AND status IN ('{WorkStatus.FAILED}', '{WorkStatus.CANCELLED}')),
           r AS (UPDATE run_items i SET status = '{WorkStatus.QUEUED}', finished_at = NULL, error_message = NULL
                 FROM old WHERE i.id = old.id RETURNING old.status AS was)
           SELECT count(*) FILTER (WHERE was = '{WorkStatus.FAILED}') AS f, count(*) AS n FROM r""",
        run_id,
        step,
    )
    sql, args = named(
        f"""UPDATE run_steps SET status = '{WorkStatus.RUNNING}', finished_at = NULL, with_errors = false,
                  items_failed = items_failed - :failed,
                  items_cancelled = items_cancelled - (:reopened - :failed)
           WHERE run_id = :run_id AND step = :step""",
        run_id=run_id,
        step=step,
        failed=counts["f"],
        reopened=counts["n"],
    )
    await conn.execute(sql, *args)


async def _reopen_downstream(
    conn: asyncpg.Connection, run_id: int, step: str, pipeline: Pipeline
) -> list[str]:
    """Steps skipped downstream of the retried one become pending again, with fresh attempts."""
    deps = {n: s.depends_on for n, s in pipeline.spec.steps.items()}
    below = [n for n in dag.topological_order(deps) if step in dag.ancestors(deps, n)]
    if not below:
        return []
    reopened = [
        r["step"]
        for r in await conn.fetch(
            f"""UPDATE run_steps SET status = '{WorkStatus.PENDING}', finished_at = NULL, items_skipped = 0
           WHERE run_id = $1 AND step = ANY($2) AND status IN ('{WorkStatus.SKIPPED}', '{WorkStatus.UPSTREAM_FAILED}')
           RETURNING step""",
            run_id,
            below,
        )
    ]
    if reopened:
        await conn.execute(
            f"""UPDATE run_items SET status = '{WorkStatus.PENDING}', finished_at = NULL
               WHERE run_id = $1 AND step = ANY($2) AND status = '{WorkStatus.SKIPPED}'""",
            run_id,
            reopened,
        )
        # An attempt skipped before it ever started becomes pending again with its number,
        # so the step keeps its whole automatic-retry budget; one that did run (a sensor that
        # timed out into Skip) is followed by the next number.
        await conn.execute(
            f"""UPDATE step_attempts SET status = '{WorkStatus.PENDING}', finished_at = NULL
               WHERE run_id = $1 AND step = ANY($2) AND status = '{WorkStatus.SKIPPED}' AND first_started_at IS NULL""",
            run_id,
            reopened,
        )
        latest = await conn.fetch(
            f"""SELECT id FROM (SELECT DISTINCT ON (step, item_index) id, status
                               FROM step_attempts WHERE run_id = $1 AND step = ANY($2)
                               ORDER BY step, item_index, number DESC) latest
               WHERE status <> '{WorkStatus.PENDING}'""",
            run_id,
            reopened,
        )
        await next_attempts(
            conn, [r["id"] for r in latest], kind="automatic", status=WorkStatus.PENDING
        )
    return reopened
