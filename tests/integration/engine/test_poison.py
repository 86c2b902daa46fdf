"""Values PostgreSQL cannot store (a NUL character): refused at the door, or failing the one
attempt that produced them; never a batch re-executed forever."""

from __future__ import annotations

import datetime as dt
import signal
from pathlib import Path

import pytest

from dirigent.engine.shapes.manifests.loading import parse_manifest, read_text
from dirigent.engine.shapes.problems import ProblemsError
from tests.support.harness import Harness, spawn_worker
from tests.support.waiting import eventually

FAN = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: poison}}
spec:
  steps:
    each:
      block: testing.poison
      forEach: [none, output, none, log, error, none, message]
      onItemFailure: Continue
      config: {{path: "{path}", where: "${{item}}"}}
"""


def runs_by_attempt(path: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in path.read_text().splitlines():
        attempt = line.split(" ", 2)[1]
        counts[attempt] = counts.get(attempt, 0) + 1
    return counts


async def test_one_unstorable_output_fails_its_attempt_alone_and_nothing_runs_twice(
    h: Harness, tmp_path: Path
) -> None:
    path = tmp_path / "runs.log"
    await h.apply(FAN.format(path=path))
    run = await h.run("poison")
    # Short leases: were a batch lost, its attempts would be recovered and executed again.
    async with h.workers(
        1, lease=dt.timedelta(seconds=1), heartbeat=dt.timedelta(milliseconds=300)
    ):
        assert await h.until_finished(run.run_id, timeout=15) == "completed_with_errors"
    items = {a["item_index"]: a for a in await h.attempts(run.run_id, "each")}
    assert len(items) == 7, "one attempt per item: nothing was retried"
    assert (items[1]["status"], items[1]["error_code"], items[1]["error_class"]) == (
        "failed",
        "engine.value.unstorable",
        "rejected",
    )
    assert "output.value" in items[1]["error_message"]
    assert items[1]["output"] is None
    # Free text is stored with the character escaped; the attempt keeps its own outcome.
    assert items[3]["status"] == "succeeded"
    assert items[4]["status"] == "failed"
    assert items[4]["error_code"] == "testing.poison.failed"
    assert "\\u0000" in items[4]["error_message"]
    logs = [e["message"] for e in await h.logs(run.run_id) if e["attempt_id"] == items[3]["id"]]
    assert "a\\u0000b" in logs
    assert all(a["status"] == "succeeded" for i, a in items.items() if i not in (1, 4))
    assert list(runs_by_attempt(path).values()) == [1] * 7, "every item executed exactly once"


@pytest.mark.parametrize(
    ("value", "where"),
    [('"a\\0b"', "spec.steps.s.config.value"), ('{"k\\0": 1}', "spec.steps.s.config.value")],
)
def test_a_manifest_holding_a_nul_is_refused_with_a_located_problem(value: str, where: str) -> None:
    docs, problems = read_text(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: bad}}
spec:
  steps:
    s: {{block: core.echo, config: {{value: {value}}}}}
""")
    assert not problems
    manifest, problems = parse_manifest(docs[0].data)
    assert manifest is None
    assert [(p.code, p.location.startswith(where)) for p in problems] == [
        ("manifest.value.unstorable", True)
    ]


HEAD_OK = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: ok}
spec:
  params: {type: object, properties: {name: {type: string}, tags: {type: array}}}
  steps:
    s: {block: core.echo, config: {value: "${params.name}"}}
"""


async def test_params_holding_a_nul_are_refused_with_a_located_problem(h: Harness) -> None:
    await h.apply(HEAD_OK)
    with pytest.raises(ProblemsError) as err:
        await h.run("ok", {"name": "fine", "tags": ["x", "a\0b"]})
    [p] = err.value.problems
    assert (p.code, p.location) == ("run.params.unstorable", "params.tags[1]")
    assert await h.fetchval("SELECT count(*) FROM runs") == 0


async def test_an_attempt_that_kills_its_worker_fails_after_a_bounded_number_of_recoveries(
    h: Harness, db_url: str, tmp_path: Path
) -> None:
    """SIGKILL, again and again: the attempt is recovered a bounded number of times, then fails."""
    path = tmp_path / "crash.log"
    await h.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: crash}}
spec:
  steps:
    boom: {{block: testing.crash, retry: {{maxAttempts: 1}}, config: {{path: "{path}"}}}}
    after: {{block: core.noop, dependsOn: [boom], rule: AllDone}}
""")
    run = await h.run("crash")
    sweeper = h.worker(max_recoveries=3)
    for _ in range(10):
        [boom] = await h.attempts(run.run_id, "boom")
        if boom["status"] != "queued":
            break
        proc = spawn_worker(
            db_url,
            tmp_path / "art",
            concurrency=1,
            extra={"DIRIGENT_LEASE_DURATION": "1s", "DIRIGENT_HEARTBEAT_INTERVAL": "300ms"},
        )
        try:
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == -signal.SIGKILL

        # The sweeper (in this process; no claim loop) recovers the expired lease.
        async def still_leased() -> int:
            await sweeper.sweep()
            return int(
                await h.fetchval(
                    "SELECT count(*) FROM step_attempts WHERE status = 'running' AND step = 'boom'"
                )
            )

        await eventually(
            still_leased, lambda n: n == 0, timeout=10, every=0.2, what="the lease recovered"
        )
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "failed"
    [boom] = await h.attempts(run.run_id, "boom")
    assert (boom["status"], boom["error_code"]) == ("failed", "engine.attempt.unrecoverable")
    assert boom["recoveries"] == 3
    assert len(path.read_text().splitlines()) == 3
    assert await h.steps(run.run_id) == {"boom": "failed", "after": "succeeded"}


@pytest.mark.parametrize("raises", ["SystemExit", "KeyboardInterrupt", "custom"])
async def test_a_block_raising_a_base_exception_fails_its_attempt_and_the_worker_goes_on(
    h: Harness, raises: str
) -> None:
    """``sys.exit()`` in a block took the worker down and, handed back, every next worker."""
    await h.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: exits}}
spec:
  steps:
    bye: {{block: testing.exits, config: {{raises: {raises}}}}}
    after: {{block: core.noop, dependsOn: [bye], rule: AllDone}}
""")
    await h.apply(HEAD_OK)
    first = await h.run("exits")
    async with h.workers(1) as (worker,):
        assert await h.until_finished(first.run_id) == "failed"
        # The same worker goes on with the next run.
        second = await h.run("ok", {"name": "fine", "tags": []})
        assert await h.until_finished(second.run_id) == "succeeded"
        assert worker.executed >= 3
    [bye] = await h.attempts(first.run_id, "bye")
    assert (bye["status"], bye["error_class"], bye["error_code"]) == (
        "failed",
        "crashed",
        "engine.block.crashed",
    )
    assert raises.replace("custom", "_Custom") in bye["error_message"]
    assert len(await h.attempts(first.run_id, "bye")) == 1  # not re-run by any policy
    assert await h.steps(first.run_id) == {"bye": "failed", "after": "succeeded"}
