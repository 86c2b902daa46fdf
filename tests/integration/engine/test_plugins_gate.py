"""The plugin host and the unsafe-block gate.

``testing.*`` blocks come from a separate distribution (tests/plugin) installed into the
environment; they are found only through its ``dirigent.plugins.v1`` entry point. Runs are
created through the door: by the test's engine, which enables ``testing.unsafe``, or by a
second engine on the same database whose instance does not.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from dirigent.engine import ProblemsError, discover
from tests.support.harness import Harness, harness
from tests.support.waiting import eventually

UNSAFE = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: u}
spec:
  steps:
    run_code: {block: testing.unsafe}
"""


def test_a_third_party_block_is_discovered_through_its_entry_point() -> None:
    catalog = discover()
    entry = catalog.block("testing.record")
    assert entry is not None
    assert entry.plugin == "testing"
    assert type(entry.block).__module__ == "dirigent_testblocks"
    assert entry.config_schema["properties"]["path"]["type"] == "string"


async def test_a_third_party_block_runs_end_to_end(h: Harness, tmp_path: Path) -> None:
    await h.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: third}}
spec:
  steps:
    rec: {{block: testing.record, forEach: [a, b], config: {{path: "{tmp_path}/rec.log"}}}}
""")
    run = await h.run("third")
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "succeeded"
    ends = [ln for ln in (tmp_path / "rec.log").read_text().splitlines() if ln.startswith("end")]
    assert sorted(ln.split()[-1] for ln in ends) == ['"a"', '"b"']


async def test_the_gate_refuses_run_creation_for_a_block_not_enabled(
    h: Harness, tmp_path: Path
) -> None:
    await h.apply(UNSAFE)
    async with harness(h.url, tmp_path / "strict", unsafe=()) as strict:
        with pytest.raises(ProblemsError) as refused:
            await strict.run("u")
    assert refused.value.problems[0].code == "run.block.unsafe_disabled"
    created = await h.run("u")  # the test's engine enables testing.unsafe
    assert created.status == "running"


async def test_the_gate_is_checked_again_at_claim(h: Harness) -> None:
    """Tightening the config stops work that was already queued."""
    await h.apply(UNSAFE)
    created = await h.run("u")  # the test's engine enables testing.unsafe
    # No other worker can run it and no grace: it fails at once.
    async with h.workers(1, enabled_unsafe=frozenset(), missing_block_grace=dt.timedelta(0)):
        assert await h.until_finished(created.run_id) == "failed"
    [attempt] = await h.attempts(created.run_id)
    assert (attempt["error_class"], attempt["error_code"]) == (
        "rejected",
        "engine.block.unsafe_disabled",
    )
    created = await h.run("u")  # the test's engine enables testing.unsafe
    async with h.workers(1, enabled_unsafe=frozenset({"testing.unsafe"})):
        assert await h.until_finished(created.run_id) == "succeeded"


async def _unsafe_run(h: Harness) -> int:
    await h.apply(UNSAFE)
    created = await h.run("u")  # the test's engine enables testing.unsafe
    return created.run_id


async def _released(h: Harness, run_id: int) -> int:
    return int(
        await h.fetchval(
            "SELECT count(*) FROM log_entries WHERE run_id = $1 AND message LIKE 'released by %'",
            run_id,
        )
    )


async def test_a_worker_that_cannot_run_a_block_leaves_it_to_one_that_can(h: Harness) -> None:
    run_id = await _unsafe_run(h)
    async with h.workers(1, enabled_unsafe=frozenset()) as [lacking]:
        await eventually(lambda: _released(h, run_id), timeout=15, what="the attempt released")
        assert await h.status(run_id) == "running"
        async with h.workers(1, enabled_unsafe=frozenset({"testing.unsafe"})) as [able]:
            assert await h.until_finished(run_id) == "succeeded"
    [attempt] = await h.attempts(run_id)
    assert attempt["status"] == "succeeded" and attempt["number"] == 1
    assert attempt["lease_owner"] is None
    released = lacking.metrics.registry.get_sample_value(
        "dirigent_attempts_total", {"block": "testing.unsafe", "outcome": "released"}
    )
    assert released is not None and released >= 1
    assert able.executed == 1 and lacking.executed == 0


async def test_an_attempt_no_live_worker_can_run_fails_after_the_grace(h: Harness) -> None:
    run_id = await _unsafe_run(h)
    grace = dt.timedelta(seconds=1)
    async with h.workers(1, enabled_unsafe=frozenset(), missing_block_grace=grace):
        assert await h.until_finished(run_id) == "failed"
    [attempt] = await h.attempts(run_id)
    assert attempt["error_code"] == "engine.block.unsafe_disabled"
    assert await _released(h, run_id) >= 1
    assert (attempt["finished_at"] - attempt["first_started_at"]) >= grace
