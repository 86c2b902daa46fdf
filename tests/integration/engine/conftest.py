"""Fixtures for engine tests: ``h`` is a Harness on a fresh database."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.integration.engine.harness import Harness, harness


@pytest.fixture
async def h(db_url: str, tmp_path: Path) -> AsyncIterator[Harness]:
    async with harness(db_url, tmp_path / "artifacts") as found:
        yield found
        # After every scenario: a fan-out step's counters are exactly its items' statuses,
        # and every step's attempt counter is exactly its attempts.
        assert await counter_drift(found) == []
        assert await attempt_drift(found) == []


COUNTERS = """
SELECT s.run_id, s.step,
       (s.items_succeeded, s.items_failed, s.items_skipped, s.items_cancelled) AS counted,
       (count(*) FILTER (WHERE i.status = 'succeeded'), count(*) FILTER (WHERE i.status = 'failed'),
        count(*) FILTER (WHERE i.status = 'skipped'), count(*) FILTER (WHERE i.status = 'cancelled'))
           AS grouped
FROM run_steps s LEFT JOIN run_items i ON i.run_id = s.run_id AND i.step = s.step
WHERE s.items IS NOT NULL
GROUP BY s.id
"""


async def counter_drift(h: Harness) -> list[tuple[int, str, object, object]]:
    async with h.pool.acquire() as conn:
        rows = await conn.fetch(COUNTERS)
    return [
        (r["run_id"], r["step"], tuple(r["counted"]), tuple(r["grouped"]))
        for r in rows
        if tuple(r["counted"]) != tuple(r["grouped"])
    ]


ATTEMPTS = """
SELECT s.run_id, s.step, s.attempts AS counted, count(a.id) AS grouped
FROM run_steps s LEFT JOIN step_attempts a ON a.run_id = s.run_id AND a.step = s.step
GROUP BY s.id HAVING s.attempts <> count(a.id)
"""


async def attempt_drift(h: Harness) -> list[tuple[int, str, int, int]]:
    async with h.pool.acquire() as conn:
        rows = await conn.fetch(ATTEMPTS)
    return [(r["run_id"], r["step"], r["counted"], r["grouped"]) for r in rows]


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Worker processes a test started; stopped (SIGTERM, then SIGKILL) afterwards."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in started:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
