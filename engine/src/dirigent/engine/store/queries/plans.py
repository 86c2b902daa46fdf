"""The plans a piece of work executes, nested statements included.

``EXPLAIN`` shows a statement's own plan only; what a function runs inside it (the claim's
``claimable_queued``) or a trigger fires is planned when it runs. ``auto_explain``, loaded
for one transaction, sends every executed plan back to the session as a LOG message. Tests
that guard plans and the scale bench read them here; nothing on the engine's path calls it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal

import asyncpg

AUTO_EXPLAIN = """
LOAD 'auto_explain';
SET LOCAL auto_explain.log_min_duration = 0;
SET LOCAL auto_explain.log_nested_statements = on;
SET LOCAL auto_explain.log_format = {format};
SET LOCAL client_min_messages = log
"""


async def executed_plans(
    conn: asyncpg.Connection,
    work: Callable[[asyncpg.Connection], Awaitable[object]],
    *,
    format: Literal["json", "text"] = "text",
) -> list[str]:
    """Run ``work(conn)`` in a transaction that is rolled back, and return the plan of every
    statement it executed, in order (needs a superuser: ``LOAD``)."""
    messages: list[str] = []

    def heard(_conn: object, message: asyncpg.PostgresLogMessage) -> None:
        messages.append(message.message)

    conn.add_log_listener(heard)
    tx = conn.transaction()
    await tx.start()
    try:
        await conn.execute(AUTO_EXPLAIN.format(format=format))
        await work(conn)
    finally:
        await tx.rollback()
        conn.remove_log_listener(heard)
    return [m.split("plan:", 1)[1].strip() for m in messages if "plan:" in m]
