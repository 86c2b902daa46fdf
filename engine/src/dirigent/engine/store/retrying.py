"""Manual retry: one more try of a failed step, or of exactly the failed items of a fan-out.

Resuming starts from the failure, never from scratch: successful steps keep their attempts
and outputs (the retry reads them like any attempt does), and steps that were skipped only
because of this failure become pending again, so the branch carries on if the retry
succeeds. A manual attempt is never retried automatically — a person asked for exactly one
more try — and the idempotency key (per run, matched exactly) makes a repeated request
return the same attempts; the same key for another step of the run is refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import asyncpg

from dirigent.engine.manifests import dag
from dirigent.engine.manifests.pipeline import Pipeline
from dirigent.engine.problems import ProblemsError, problem
from dirigent.engine.store.progress import notify_work
from dirigent.engine.store.versions import VersionCache


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
    earlier = await conn.fetch(
        "SELECT id, step FROM step_attempts WHERE run_id = $1 AND idempotency_key = $2 ORDER BY id",
        run_id,
        idempotency_key,
    )
    if earlier:
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
    if run["status"] == "cancelled":
        raise ProblemsError(
            [problem("retry.run.cancelled", f"run {run_id} was cancelled; start a new run", "run")]
        )
    pipeline = await versions.get(conn, run["version_id"])
    if step not in pipeline.spec.steps:
        raise ProblemsError(
            [problem("retry.step.unknown", f"run {run_id} has no step '{step}'", "step")]
        )
    state = await conn.fetchrow(
        "SELECT status, items, items_failed FROM run_steps WHERE run_id = $1 AND step = $2",
        run_id,
        step,
    )
    fan_out = state["items"] is not None
    retryable = state["status"] == "failed" or (
        fan_out and state["status"] == "succeeded" and state["items_failed"]
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
    # The work to redo: the step itself, or its failed items (and, under FailFast, the items
    # the failure cancelled before they ran).
    targets = await conn.fetch(
        """SELECT DISTINCT ON (item_index) item_index, run_item_id, number, block, priority, requires_workers
           FROM step_attempts WHERE run_id = $1 AND step = $2
             AND ($3 = false OR run_item_id IN (SELECT id FROM run_items WHERE run_id = $1 AND step = $2
                                                AND status IN ('failed', 'cancelled')))
           ORDER BY item_index, number DESC""",
        run_id,
        step,
        fan_out,
    )
    seq = await conn.fetchval(
        "UPDATE runs SET queued_seq = queued_seq + $2 WHERE id = $1 RETURNING queued_seq - $2",
        run_id,
        len(targets),
    )
    ids = await conn.fetch(
        """INSERT INTO step_attempts (run_id, run_item_id, step, item_index, number, kind, status, priority,
                                      requires_workers, block, available_at, fair_seq, idempotency_key)
           SELECT $1, t.item, $2, t.idx, t.num + 1, 'manual', 'queued', t.prio, t.req::jsonb, t.block, now(),
                  $3 + t.ord, $4
           FROM unnest($5::bigint[], $6::int[], $7::int[], $8::smallint[], $9::text[], $10::text[])
                WITH ORDINALITY AS t(item, idx, num, prio, req, block, ord)
           RETURNING id""",
        run_id,
        step,
        seq,
        idempotency_key,
        [t["run_item_id"] for t in targets],
        [t["item_index"] for t in targets],
        [t["number"] for t in targets],
        [t["priority"] for t in targets],
        [json.dumps(t["requires_workers"]) for t in targets],
        [t["block"] for t in targets],
    )
    if fan_out:
        counts = await conn.fetchrow(
            """WITH old AS (SELECT id, status FROM run_items
                            WHERE run_id = $1 AND step = $2 AND status IN ('failed', 'cancelled')),
               r AS (UPDATE run_items i SET status = 'queued', finished_at = NULL, error_message = NULL
                     FROM old WHERE i.id = old.id RETURNING old.status AS was)
               SELECT count(*) FILTER (WHERE was = 'failed') AS f, count(*) AS n FROM r""",
            run_id,
            step,
        )
        await conn.execute(
            """UPDATE run_steps SET status = 'running', finished_at = NULL, with_errors = false,
                      items_failed = items_failed - $3, items_cancelled = items_cancelled - ($4 - $3)
               WHERE run_id = $1 AND step = $2""",
            run_id,
            step,
            counts["f"],
            counts["n"],
        )
    else:
        await conn.execute(
            "UPDATE run_steps SET status = 'running', finished_at = NULL WHERE run_id = $1 AND step = $2",
            run_id,
            step,
        )
    reopened = await _reopen_downstream(conn, run_id, step, pipeline)
    await conn.execute(
        """UPDATE runs SET status = 'running', finished_at = NULL, failed_step = NULL, error_message = NULL,
                  last_progress_at = now(), stuck_at = NULL WHERE id = $1""",
        run_id,
    )
    await conn.execute(
        "INSERT INTO log_entries (run_id, step, level, message, fields) VALUES ($1, $2, 'info', $3, $4)",
        run_id,
        step,
        f"manual retry of step {step}" + (f" ({len(targets)} items)" if fan_out else ""),
        {"attempts": len(ids), "reopened": reopened},
    )
    await notify_work(conn)
    return ManualRetry(tuple(r["id"] for r in ids), created=True)


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
            """UPDATE run_steps SET status = 'pending', finished_at = NULL, items_skipped = 0
           WHERE run_id = $1 AND step = ANY($2) AND status IN ('skipped', 'upstream_failed')
           RETURNING step""",
            run_id,
            below,
        )
    ]
    if reopened:
        await conn.execute(
            """UPDATE run_items SET status = 'pending', finished_at = NULL
               WHERE run_id = $1 AND step = ANY($2) AND status = 'skipped'""",
            run_id,
            reopened,
        )
        # An attempt skipped before it ever started becomes pending again with its number,
        # so the step keeps its whole automatic-retry budget; one that did run (a sensor that
        # timed out into Skip) is followed by the next number.
        await conn.execute(
            """UPDATE step_attempts SET status = 'pending', finished_at = NULL
               WHERE run_id = $1 AND step = ANY($2) AND status = 'skipped' AND first_started_at IS NULL""",
            run_id,
            reopened,
        )
        await conn.execute(
            """INSERT INTO step_attempts (run_id, run_item_id, step, item_index, number, kind, status, priority,
                                          requires_workers, block)
               SELECT run_id, run_item_id, step, item_index, number + 1, 'automatic', 'pending', priority,
                      requires_workers, block
               FROM (SELECT DISTINCT ON (step, item_index) *
                     FROM step_attempts WHERE run_id = $1 AND step = ANY($2)
                     ORDER BY step, item_index, number DESC) latest
               WHERE status <> 'pending'""",
            run_id,
            reopened,
        )
    return reopened
