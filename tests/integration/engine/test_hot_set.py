"""The hot set: on a database with history, the claim reads only indexes of live work.

The claim, the idle worker's next-due lookup, the sweeper's levels and retention each
have a partial index whose rows are only the work they look for, so their cost does not
grow with the finished history beside it. These tests fill a database with finished runs
(set-based, as years of history would leave it), ANALYZE it so the planner knows, and
read the plans with EXPLAIN: no timing is asserted, only which relation each plan reads.

The claim and the outcome's record are also run for real on a queue the statistics have not
seen yet (a fan-out inserted after the last ANALYZE, as every burst of work is), with
``auto_explain`` sending back the plan of every statement they execute, the claim
function's body included.

A test of the store's statements themselves (``transactions.claims``, ``outcomes``,
``counting``, ``sweeping`` and ``queries.plans``): it names and runs them below the door,
since their plans, not what a door answers, are what it checks.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import asyncpg

from dirigent.engine.shapes.attempts import Outcome
from dirigent.engine.store.pool import connect
from dirigent.engine.store.queries.plans import executed_plans
from dirigent.engine.store.transactions import claims
from dirigent.engine.store.transactions.claims import CLAIM
from dirigent.engine.store.transactions.counting import COUNTED_UNFINISHED
from dirigent.engine.store.transactions.outcomes import record_many
from dirigent.engine.store.transactions.sweeping import PRUNE_RUNS
from tests.support.harness import Harness

HISTORY_RUNS = 20_000  # 2 steps, 5 finished attempts each: 100k attempts, 80k items, 100k logs

PIPELINE = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: hist}
spec:
  steps:
    a: {block: core.noop}
    b: {block: core.noop, dependsOn: [a], forEach: [0, 1, 2, 3]}
"""

FILL = [
    """INSERT INTO runs (id, namespace, pipeline_id, version_id, status, triggered_by_kind,
                         started_at, finished_at, last_progress_at)
       SELECT g, 'default', $2, $3, 'succeeded', 'schedule', now() - interval '300 days',
              now() - interval '300 days' + g * interval '1 second', now() - interval '300 days'
       FROM generate_series(1000001, 1000000 + $1) g""",
    """INSERT INTO run_steps (run_id, step, status, items, items_succeeded, started_at, finished_at)
       SELECT g, s.step, 'succeeded', s.items, coalesce(s.items, 0), now() - interval '300 days',
              now() - interval '300 days'
       FROM generate_series(1000001, 1000000 + $1) g, (VALUES ('a', NULL::int), ('b', 4)) s(step, items)""",
    """INSERT INTO run_items (id, run_id, step, index, value, status, finished_at)
       SELECT g * 4 + i, g, 'b', i, to_jsonb(i), 'succeeded', now() - interval '300 days'
       FROM generate_series(1000001, 1000000 + $1) g, generate_series(0, 3) i""",
    """INSERT INTO step_attempts (run_id, run_item_id, step, item_index, number, status, block,
                                  available_at, started_at, finished_at)
       SELECT g, CASE WHEN i >= 0 THEN g * 4 + i END, CASE WHEN i < 0 THEN 'a' ELSE 'b' END,
              CASE WHEN i >= 0 THEN i END, 1, 'succeeded', 'core.noop', now() - interval '300 days',
              now() - interval '300 days', now() - interval '300 days'
       FROM generate_series(1000001, 1000000 + $1) g, generate_series(-1, 3) i""",
    """INSERT INTO log_entries (run_id, step, level, message, created_at)
       SELECT g, 'b', 'info', 'line ' || i, now() - interval '300 days'
       FROM generate_series(1000001, 1000000 + $1) g, generate_series(0, 4) i""",
]


async def with_history(h: Harness) -> None:
    """Finished history, live queued work (a fan-out) and waiting work, then ANALYZE."""
    await h.apply(PIPELINE)
    pipeline_id, version_id = (
        await h.fetchval("SELECT id FROM pipelines WHERE name = 'hist'"),
        await h.fetchval("SELECT current_version_id FROM pipelines WHERE name = 'hist'"),
    )
    await h.execute(FILL[0], HISTORY_RUNS, pipeline_id, version_id)
    for sql in FILL[1:]:
        await h.execute(sql, HISTORY_RUNS)
    live = await h.run("hist")  # step a queued: live work beside the history
    await h.execute(
        """UPDATE step_attempts SET status = 'waiting', next_poll_at = now() + interval '1 hour'
           WHERE run_id = $1 AND step = 'b' AND item_index < 2""",
        live.run_id,
    )
    await h.execute("ANALYZE")
    queued = await h.fetchval("SELECT count(*) FROM step_attempts WHERE status = 'queued'")
    finished = await h.fetchval("SELECT count(*) FROM step_attempts WHERE status = 'succeeded'")
    assert (queued, finished) == (1, 5 * HISTORY_RUNS)


async def plan(h: Harness, sql: str, *args: Any) -> list[dict[str, Any]]:
    """Every node of the statement's plan (EXPLAIN only: nothing is executed)."""
    async with h.pool.acquire() as conn, conn.transaction():
        raw = await conn.fetchval("EXPLAIN (FORMAT JSON) " + sql, *args)
    root = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
    nodes: list[dict[str, Any]] = []
    stack = [root]
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack += node.get("Plans", [])
    return nodes


async def statement_plans(h: Harness, sql: str, *args: Any) -> list[dict[str, Any]]:
    """Every node of the plan of every statement ``sql`` executes, nested ones included."""
    return await _auto_explained(h, lambda conn: conn.fetch(sql, *args))


async def _auto_explained(h: Harness, work: Any) -> list[dict[str, Any]]:
    """Every node of every plan ``work(conn)`` executes (``store.plans``), rolled back."""
    conn = await connect(h.url)
    try:
        plans = await executed_plans(conn, work, format="json")
    finally:
        await conn.close()
    nodes: list[dict[str, Any]] = []
    for plan in plans:
        stack = [json.loads(plan)["Plan"]]
        while stack:
            node = stack.pop()
            nodes.append(node)
            stack += node.get("Plans", [])
    return nodes


def scans(nodes: list[dict[str, Any]], relation: str) -> list[tuple[str, str | None]]:
    """(node type, index) of every scan of ``relation`` in the plan."""
    return [
        (n["Node Type"], n.get("Index Name"))
        for n in nodes
        if n.get("Relation Name") == relation and "Scan" in n["Node Type"]
    ]


async def test_the_claim_reads_only_the_partial_indexes_of_live_work(h: Harness) -> None:
    await with_history(h)
    nodes = await statement_plans(h, CLAIM, "w", 16, [], dt.timedelta(seconds=30))
    attempts = scans(nodes, "step_attempts")
    indexes = {index for _, index in attempts}
    assert "ix_step_attempts_claim_queued" in indexes, attempts
    assert "ix_step_attempts_next_poll_at_waiting" in indexes, attempts
    # Every read of step_attempts is one of the live-work indexes or a primary-key lookup
    # of the rows they found: never a scan over the history.
    assert indexes <= {
        "ix_step_attempts_claim_queued",
        "ix_step_attempts_next_poll_at_waiting",
        "pk_step_attempts",
    }, attempts
    assert all(kind != "Seq Scan" for kind, _ in attempts), attempts


async def test_idle_lookups_and_retention_read_their_partial_indexes(h: Harness) -> None:
    await with_history(h)
    next_due = await plan(
        h,
        "SELECT min(next_poll_at) FROM step_attempts WHERE status = 'waiting' AND next_poll_at > now()",
    )
    assert {i for _, i in scans(next_due, "step_attempts")} == {
        "ix_step_attempts_next_poll_at_waiting"
    }
    queued = await plan(
        h, "SELECT count(*) FROM step_attempts WHERE status = 'queued' AND available_at <= now()"
    )
    assert {i for _, i in scans(queued, "step_attempts")} == {"ix_step_attempts_claim_queued"}
    counted = await plan(h, COUNTED_UNFINISHED)
    assert all(kind != "Seq Scan" for kind, _ in scans(counted, "run_steps")), counted
    assert {n.get("Index Name") for n in counted} >= {"ix_run_steps_running_fan_outs"}, counted
    prune = await plan(h, PRUNE_RUNS, dt.timedelta(days=30), 500)
    assert ("Index Scan", "ix_runs_finished_at_terminal") in scans(prune, "runs"), prune


FAN_OUT = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: burst}
spec:
  steps:
    each: {block: core.noop, forEach: %s}
"""


async def test_a_queue_the_statistics_have_not_seen_is_claimed_and_recorded_by_index(
    h: Harness,
) -> None:
    """A burst of work no ANALYZE has seen yet: the planner believes almost nothing
    is queued or running. The claim must still walk the claim index in order (not read and
    sort every queued row), and the record must find its attempts by key (not read every
    running attempt through the lease index): both costs would grow with the burst."""
    await h.apply(FAN_OUT % list(range(3000)))
    await h.run("burst")
    assert await h.fetchval("SELECT count(*) FROM step_attempts WHERE status = 'queued'") == 3000

    async def claim_and_record(conn: asyncpg.Connection) -> None:
        lease = dt.timedelta(seconds=30)
        for _ in range(3):  # running attempts pile up as a busy worker's would
            held = await claims.claim(conn, "w", limit=16, tags=[], lease=lease)
            assert len(held) == 16
        outcomes = [Outcome(a, "w", "succeeded", output={}) for a in held]
        recorded = await record_many(conn, outcomes, h.versions)
        assert not any(s.discarded for s in recorded)

    nodes = await _auto_explained(h, claim_and_record)
    attempts = scans(nodes, "step_attempts")
    assert ("Index Scan", "ix_step_attempts_claim_queued") in attempts, attempts
    assert all(kind != "Seq Scan" for kind, _ in attempts), attempts
    by_lease = [
        n for n in nodes if n.get("Index Name") == "ix_step_attempts_lease_expires_at_running"
    ]
    assert not by_lease, by_lease
    sorted_queue = [
        n
        for n in nodes
        if n["Node Type"] == "Sort" and any("fair_seq" in k for k in n.get("Sort Key", []))
    ]
    assert not sorted_queue, sorted_queue
