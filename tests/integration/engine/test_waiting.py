"""Waiting work: async operators (submit, probe, fetch) and sensors, parked as rows."""

from __future__ import annotations

from pathlib import Path

from tests.support.harness import Harness
from tests.support.waiting import eventually


def remote(tmp: Path, **config: object) -> str:
    extra = "".join(f", {k}: {v}" for k, v in config.items())
    return f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: remote}}
spec:
  steps:
    job: {{block: testing.remote, poll: 100ms, config: {{dir: "{tmp}"{extra}}}}}
    after: {{block: core.echo, dependsOn: [job], config: {{value: "${{steps.job.output.ref}}"}}}}
"""


def events(tmp: Path) -> list[list[str]]:
    return [ln.split() for ln in (tmp / "events.log").read_text().splitlines()]


async def test_an_async_operator_is_submitted_once_probed_until_done_then_fetched(
    h: Harness, tmp_path: Path
) -> None:
    await h.apply(remote(tmp_path, polls=3))
    run = await h.run("remote")
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "succeeded"
    kinds = [e[0] for e in events(tmp_path)]
    assert kinds.count("submit") == 1
    assert kinds.count("probe") == 3
    assert kinds.count("fetch") == 1
    # probe meta replaces the handle's meta: each probe saw the previous probe's count
    assert [e[2] for e in events(tmp_path) if e[0] == "probe"] == ["0", "1", "2"]
    [job] = await h.attempts(run.run_id, "job")
    assert job["handle"]["ref"] == job["output"]["ref"]
    assert job["fetched"] == job["output"]
    [after] = await h.attempts(run.run_id, "after")
    assert after["output"] == {"value": job["handle"]["ref"]}


async def test_a_failed_probe_is_an_unknown_failure(h: Harness, tmp_path: Path) -> None:
    await h.apply(remote(tmp_path, polls=1, outcome="failed"))
    run = await h.run("remote")
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "failed"
    [job] = await h.attempts(run.run_id, "job")
    assert (job["error_class"], job["error_code"]) == ("unknown", "engine.remote.failed")


async def test_a_vanished_job_fails_transient_after_consecutive_gone_probes(
    h: Harness, tmp_path: Path
) -> None:
    await h.apply(remote(tmp_path, polls=1000))
    run = await h.run("remote")
    async with h.workers(1):
        await eventually(lambda: list(tmp_path.glob("job-*.json")), what="the job submitted")
        for job in tmp_path.glob("job-*.json"):
            job.unlink()
        assert await h.until_finished(run.run_id) == "failed"
    [job] = await h.attempts(run.run_id, "job")
    assert (job["error_class"], job["error_code"]) == ("transient", "engine.remote.gone")
    assert job["gone_count"] == 2  # the third consecutive GONE recorded it


def sensor(pokes: int, deadline: str = "1h", on_timeout: str = "Fail") -> str:
    return f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: sense}}
spec:
  steps:
    wait: {{block: core.wait, poll: 50ms, deadline: {deadline}, onTimeout: {on_timeout}, config: {{pokes: {pokes}}}}}
    after: {{block: core.noop, dependsOn: [wait]}}
    cleanup: {{block: core.noop, dependsOn: [wait], rule: Always}}
"""


async def test_a_sensor_waits_as_a_row_and_keeps_message_progress_and_cursor(h: Harness) -> None:
    await h.apply(sensor(pokes=1000))
    run = await h.run("sense")
    async with h.workers(1):
        await eventually(
            lambda: h.attempts(run.run_id, "wait"),
            lambda rows: (
                rows[0]["status"] == "waiting" and (rows[0]["cursor"] or {}).get("pokes", 0) >= 3
            ),
            what="three pokes",
        )
    [wait] = await h.attempts(run.run_id, "wait")
    assert wait["status"] == "waiting"
    assert wait["number"] == 1  # NotYet spends no retry budget: still the first attempt
    pokes = wait["cursor"]["pokes"]
    assert wait["wait_message"] == "waiting for 1000 pokes"
    assert wait["wait_progress"] == pokes / 1000
    assert wait["lease_owner"] is None and wait["next_poll_at"] is not None
    messages = [e["message"] for e in await h.logs(run.run_id) if e["step"] == "wait"]
    assert messages == ["waiting for 1000 pokes"]  # logged when it changes, not on every poke


async def test_a_sensor_succeeds_when_its_condition_holds(h: Harness) -> None:
    await h.apply(sensor(pokes=3))
    run = await h.run("sense")
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "succeeded"
    [wait] = await h.attempts(run.run_id, "wait")
    assert wait["output"] == {"pokes": 3}


async def test_a_sensor_deadline_with_skip_is_seen_downstream(h: Harness) -> None:
    await h.apply(sensor(pokes=10_000, deadline="300ms", on_timeout="Skip"))
    run = await h.run("sense")
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "succeeded"
    assert await h.steps(run.run_id) == {
        "wait": "skipped",
        "after": "skipped",
        "cleanup": "succeeded",
    }


async def test_a_sensor_deadline_with_fail_fails(h: Harness) -> None:
    await h.apply(sensor(pokes=10_000, deadline="300ms", on_timeout="Fail"))
    run = await h.run("sense")
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "failed"
    [wait] = await h.attempts(run.run_id, "wait")
    assert wait["error_code"] == "engine.sensor.deadline"


async def test_a_remote_job_past_its_deadline_is_cancelled_then_failed(
    h: Harness, tmp_path: Path
) -> None:
    await h.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: late}}
spec:
  steps:
    job: {{block: testing.remote, poll: 100ms, deadline: 500ms, config: {{dir: "{tmp_path}", polls: 100000}}}}
""")
    run = await h.run("late")
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "failed"
    [job] = await h.attempts(run.run_id, "job")
    assert (job["error_class"], job["error_code"]) == ("transient", "engine.remote.deadline")
    kinds = [e[0] for e in events(tmp_path)]
    assert kinds.count("submit") == 1 and kinds.count("cancel") == 1


async def test_not_yet_without_a_cursor_keeps_the_stored_cursor(h: Harness, tmp_path: Path) -> None:
    path = tmp_path / "ticks.log"
    await h.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: keep}}
spec:
  steps:
    tick: {{block: testing.tick, poll: 50ms, config: {{path: "{path}", poll: 0.05, cursor_once: true}}}}
""")
    await h.run("keep")
    async with h.workers(1):
        await eventually(
            lambda: path.exists() and len(path.read_text().splitlines()) >= 5, what="five pokes"
        )
    lines = path.read_text().splitlines()
    assert sum(ln.startswith("first") for ln in lines) == 1, lines


async def test_a_sensor_is_poked_again_no_later_than_its_deadline(
    h: Harness, tmp_path: Path
) -> None:
    await h.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: late}}
spec:
  steps:
    tick: {{block: testing.tick, poll: 1h, deadline: 1s, onTimeout: Skip,
            config: {{path: "{tmp_path / "ticks.log"}", poll: 3600}}}}
""")
    run = await h.run("late")
    async with h.workers(1):
        assert await h.until_finished(run.run_id, timeout=15) == "succeeded"
    [tick] = await h.attempts(run.run_id, "tick")
    assert tick["status"] == "skipped"
    assert (tick["finished_at"] - tick["first_started_at"]).total_seconds() < 5


async def test_an_item_whose_paired_match_did_not_succeed_is_skipped(
    h: Harness, tmp_path: Path
) -> None:
    await h.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: paired}}
spec:
  steps:
    a: {{block: testing.flaky, forEach: [1, 2, 3], onItemFailure: Continue,
        config: {{needs: "{tmp_path}/ok-${{item}}"}}}}
    b: {{block: core.echo, forEach: "${{steps.a.items}}", dependsOn: [a],
        config: {{value: "${{steps.a.item.output.needs}}"}}}}
""")
    for n in (1, 3):
        (tmp_path / f"ok-{n}").touch()
    run = await h.run("paired")
    async with h.workers(1):
        await h.until_finished(run.run_id)
    b = await h.attempts(run.run_id, "b")
    assert [(a["item_index"], a["status"]) for a in b] == [
        (0, "succeeded"),
        (1, "skipped"),
        (2, "succeeded"),
    ]
    assert all(a["error_code"] is None for a in b)
    items = await h.fetchval(
        "SELECT array_agg(status ORDER BY index) FROM run_items WHERE run_id = $1 AND step = 'b'",
        run.run_id,
    )
    assert items == ["succeeded", "skipped", "succeeded"]


def sensors(count: int) -> str:
    return f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: sensors}}
spec:
  steps:
    wait:
      block: core.wait
      forEach: {list(range(count))}
      poll: 50ms
      deadline: 1h
      config: {{pokes: 1000}}
"""


async def test_pokes_are_claimed_and_parked_in_batches_without_the_run_lock(h: Harness) -> None:
    """Many sensors of one run: each claim takes a batch of due pokes, and a writer batch
    of parkings locks only its attempt rows. While another transaction holds the run's row
    (as a writer recording one of the run's items would), every sensor is still poked and
    parked again and again: parking never queues behind the run's writers."""
    await h.apply(sensors(40))
    run = await h.run("sensors")
    async with h.pool.acquire() as holder, holder.transaction():
        await holder.execute("SELECT 1 FROM runs WHERE id = $1 FOR NO KEY UPDATE", run.run_id)
        async with h.workers(1, concurrency=64):
            rows = await eventually(
                lambda: h.attempts(run.run_id, "wait"),
                lambda rows: (
                    len(rows) == 40 and all((r["cursor"] or {}).get("pokes", 0) >= 3 for r in rows)
                ),
                what="every sensor poked three times while the run row is held",
            )
    assert {r["number"] for r in rows} == {1}  # NotYet spends no retry budget
    assert all(r["status"] in ("waiting", "running") for r in rows)
    assert await h.status(run.run_id) == "running"
