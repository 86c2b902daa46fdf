"""Writing one run-level log line (a run's own events, not a block's output).

Attempt log lines are written in batches with their outcome (``store.outcomes``); a line
about the run itself — created, retried by hand, stuck, settled — goes through here.
"""

from __future__ import annotations

from typing import Any

from dirigent.engine.store.pool import Connection


async def log_run(
    conn: Connection,
    run_id: int,
    level: str,
    message: str,
    fields: dict[str, Any],
    *,
    step: str | None = None,
) -> None:
    """Append a log line to the run (and to ``step``, when it is about one step)."""
    await conn.execute(
        "INSERT INTO log_entries (run_id, step, level, message, fields) VALUES ($1, $2, $3, $4, $5)",
        run_id,
        step,
        level,
        message,
        fields,
    )
