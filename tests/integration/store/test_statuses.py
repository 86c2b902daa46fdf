"""The status enums are exactly what the migrated tables' CHECK constraints allow.

A test of the store's schema itself: it reads the constraints the migrations made.
"""

from __future__ import annotations

import re

import asyncpg
import pytest

from dirigent.engine.shapes.statuses import RunStatus, WorkStatus
from tests.support.postgres import plain_dsn

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("table", "values"),
    [
        ("runs", set(RunStatus)),
        ("run_steps", set(WorkStatus)),
        ("run_items", set(WorkStatus)),
        ("step_attempts", set(WorkStatus)),
    ],
)
async def test_status_enum_matches_the_check_constraint(
    db_url: str, table: str, values: set[str]
) -> None:
    conn = await asyncpg.connect(plain_dsn(db_url))
    try:
        definition = await conn.fetchval(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = $1",
            f"ck_{table}_status",
        )
    finally:
        await conn.close()
    assert definition is not None
    allowed = set(re.findall(r"'([a-z_]+)'::", definition))
    assert allowed == {str(v) for v in values}
