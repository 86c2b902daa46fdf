"""The one way a line is written to ``log_entries``: run lines and attempt lines alike.

A line is a ``LogRow``. ``write_logs`` appends a batch of them in one statement, ``log_run``
one line about the run itself (created, retried by hand, stuck, finished, alerted). A
statement that must write its lines only for the rows it actually changed (a worker's
outcome batch, a parking: an attempt no longer held writes nothing) embeds ``INSERT_LOGS``
as a CTE, filters it on ``line.attempt_id``, and passes ``log_values(rows)`` with its own
named parameters (``store.named``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dirigent.engine.shapes.attempts import Claimed, LogLine
from dirigent.engine.store.named import named
from dirigent.engine.store.pool import Connection

INSERT_LOGS = """INSERT INTO log_entries (run_id, attempt_id, run_item_id, step, level, message, fields)
    SELECT line.run_id, line.attempt_id, line.run_item_id, line.step, line.level, line.message,
           line.fields::jsonb
    FROM unnest(:log_run_ids::bigint[], :log_attempt_ids::bigint[], :log_item_ids::bigint[],
                :log_steps::text[], :log_levels::text[], :log_messages::text[], :log_fields::text[])
         AS line(run_id, attempt_id, run_item_id, step, level, message, fields)"""


@dataclass(frozen=True)
class LogRow:
    """One ``log_entries`` row: a line about a run, or about one of its attempts."""

    run_id: int
    level: str
    message: str
    fields: dict[str, Any] = field(default_factory=dict)
    step: str | None = None
    attempt_id: int | None = None
    run_item_id: int | None = None

    @classmethod
    def of(cls, attempt: Claimed, line: LogLine) -> LogRow:
        """A line a block (or the worker) wrote about an attempt it held."""
        return cls(
            run_id=attempt.run_id,
            level=line.level,
            message=line.message,
            fields=line.fields,
            step=attempt.step,
            attempt_id=attempt.id,
            run_item_id=attempt.run_item_id,
        )


def log_values(rows: Sequence[LogRow]) -> dict[str, list[Any]]:
    """The named array parameters ``INSERT_LOGS`` takes, for these rows."""
    return {
        "log_run_ids": [r.run_id for r in rows],
        "log_attempt_ids": [r.attempt_id for r in rows],
        "log_item_ids": [r.run_item_id for r in rows],
        "log_steps": [r.step for r in rows],
        "log_levels": [r.level for r in rows],
        "log_messages": [r.message for r in rows],
        "log_fields": [json.dumps(r.fields) for r in rows],
    }


async def write_logs(conn: Connection, rows: Sequence[LogRow]) -> None:
    """Append the lines, one statement for the batch."""
    if not rows:
        return
    sql, args = named(INSERT_LOGS, **log_values(rows))
    await conn.execute(sql, *args)


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
    await write_logs(conn, [LogRow(run_id, level, message, fields, step=step)])
