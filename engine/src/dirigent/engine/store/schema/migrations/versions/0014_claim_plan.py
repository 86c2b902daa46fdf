"""The claim's queued rows come from a function that can only walk the claim index in order.

The claim wants the first few queued attempts in claim order, and
``ix_step_attempts_claim_queued`` holds them in that order: an index scan that stops after
``LIMIT`` rows is the plan. But PostgreSQL chooses by its statistics, and queued work is
exactly what they miss: a 10,000-item fan-out (or 5,000 runs) is inserted and drained
within seconds, long before autovacuum analyzes the table, and on a table with years of
history the queued share is a rounding error. Believing a handful of rows are queued, the
planner read every queued row with a bitmap scan and sorted them, on every claim: a claim
cost grew with the queue (3-4 ms per claim of 16 from a 10k fan-out, against 0.1 ms).

A function's ``SET`` clauses apply while its body is planned, so here sorting and bitmap
scans are off for this one query: the only plan left is the ordered index scan, whatever
the statistics say. ``ROWS`` tells the caller's plan how many rows to expect.

Revision ID: 0014_claim_plan
Revises: 0013_remote_cancel_retry
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0014_claim_plan"
down_revision: str | None = "0013_remote_cancel_retry"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        """
        CREATE FUNCTION claimable_queued(lim bigint, tags jsonb) RETURNS SETOF bigint
        LANGUAGE sql VOLATILE ROWS 16
        SET enable_sort = off SET enable_bitmapscan = off
        AS $$
            SELECT id FROM step_attempts
            WHERE status = 'queued' AND available_at <= now() AND requires_workers <@ tags
            ORDER BY priority DESC, fair_seq, available_at, id
            LIMIT lim FOR UPDATE SKIP LOCKED
        $$
        """
    )


def downgrade() -> None:
    op.execute("DROP FUNCTION claimable_queued(bigint, jsonb)")
