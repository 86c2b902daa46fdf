"""Remote work under failure: a probe or fetch error keeps the handle, and every path that
ends an attempt holding a handle tells the remote to cancel.

Runs are cancelled through the door (``engine.runs.cancel``). The last two tests drive
``runtime.cancelling.tell_owed_remotes`` itself, the sweeper's step that pays the debts a
cancel leaves: how often it tries, when it gives up, and that it waits for a row a worker
holds. They call it directly (and commit a cancel without telling, as a canceller that died
would leave it) because no door lets a test take the sweeper's place.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from dirigent.engine.runtime.cancelling import tell_owed_remotes
from dirigent.engine.store.pool import in_transaction
from dirigent.engine.store.transactions import runs as runs_store
from tests.support.harness import Harness
from tests.support.waiting import eventually


def remote(
    tmp: Path, *, retry: int = 3, extra: str = "", name: str = "remote", polls: int = 2
) -> str:
    return f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: {name}}}
spec:
  steps:
    job:
      block: testing.remote
      poll: 100ms
      retry: {{maxAttempts: {retry}, backoff: 100ms}}
      config: {{dir: "{tmp}", polls: {polls}{extra}}}
"""


def events(tmp: Path) -> list[list[str]]:
    path = tmp / "events.log"
    if not path.exists():
        return []
    return [ln.split() for ln in path.read_text().splitlines()]


def kinds(tmp: Path) -> list[str]:
    return [e[0] for e in events(tmp)]


async def test_probe_errors_keep_the_handle_and_probe_again(h: Harness, tmp_path: Path) -> None:
    await h.apply(remote(tmp_path, extra=", probe_errors: 2"))
    run = await h.run("remote")
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "succeeded"
    assert kinds(tmp_path).count("submit") == 1, "a probe error must never resubmit the job"
    [job] = await h.attempts(run.run_id, "job")
    assert job["number"] == 1 and job["probe_errors"] == 0
    messages = [e["message"] for e in await h.logs(run.run_id) if e["step"] == "job"]
    assert sum("probing again" in m for m in messages) == 2


async def test_a_fetch_error_after_success_keeps_the_handle(h: Harness, tmp_path: Path) -> None:
    await h.apply(remote(tmp_path, extra=", fetch_errors: 1"))
    run = await h.run("remote")
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "succeeded"
    assert kinds(tmp_path).count("submit") == 1
    assert kinds(tmp_path).count("fetch") == 2
    [job] = await h.attempts(run.run_id, "job")
    assert job["number"] == 1


async def test_a_probe_error_budget_cancels_the_remote_then_fails_transient(
    h: Harness, tmp_path: Path
) -> None:
    await h.apply(remote(tmp_path, retry=1, extra=", probe_errors: 1000"))
    run = await h.run("remote")
    async with h.workers(1):
        assert await h.until_finished(run.run_id, timeout=30) == "failed"
    [job] = await h.attempts(run.run_id, "job")
    assert (job["error_class"], job["error_code"]) == ("transient", "engine.remote.lost")
    assert job["handle"] is not None
    assert kinds(tmp_path).count("probe") == 5
    assert kinds(tmp_path)[-1] == "cancel"


async def cancelled_refs(tmp: Path) -> set[str]:
    return {e[1] for e in events(tmp) if e[0] == "cancel"}


async def submitted(tmp: Path) -> list[str]:
    return [e[1] for e in events(tmp) if e[0] == "submit"]


async def test_replace_tells_the_replaced_runs_remote_to_cancel(h: Harness, tmp_path: Path) -> None:
    await h.apply(
        remote(tmp_path, polls=100000, name="replace").replace(
            "spec:\n", "spec:\n  concurrency: Replace\n"
        )
    )
    first = await h.run("replace")
    async with h.workers(1):

        async def parked() -> bool:
            return bool(
                await h.fetchval("SELECT count(*) FROM step_attempts WHERE handle IS NOT NULL")
            )

        await eventually(parked, timeout=15, what="the remote job parked")
        [ref] = await submitted(tmp_path)
        second = await h.run("replace")
        assert second.replaced == (first.run_id,)

        async def told() -> bool:
            return ref in await cancelled_refs(tmp_path)

        await eventually(told, timeout=15, what=f"remote job {ref} told to cancel")


async def test_fail_fast_tells_the_other_items_remotes_to_cancel(
    h: Harness, tmp_path: Path
) -> None:
    await h.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: fast}}
spec:
  steps:
    each:
      block: testing.remote
      poll: 100ms
      forEach: [{{o: failed, p: 3}}, {{o: succeeded, p: 100000}}, {{o: succeeded, p: 100000}}]
      config: {{dir: "{tmp_path}", outcome: "${{item.o}}", polls: "${{item.p}}"}}
""")
    run = await h.run("fast")
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "failed"
        refs = {
            a["handle"]["ref"] for a in await h.attempts(run.run_id) if a["status"] == "cancelled"
        }
        assert len(refs) == 2

        async def told() -> bool:
            return refs <= await cancelled_refs(tmp_path)

        await eventually(told, timeout=15, what=f"remote jobs {sorted(refs)} told to cancel")


async def _submitted_one(tmp: Path) -> str:
    """The ref of the one job submitted, once it is."""

    async def submitting() -> bool:
        return bool(await submitted(tmp))

    await eventually(submitting, timeout=15, what="a job submitted")
    [ref] = await submitted(tmp)
    return ref


async def _told(tmp: Path, ref: str) -> None:
    async def told() -> bool:
        return ref in await cancelled_refs(tmp)

    await eventually(told, timeout=15, what=f"remote job {ref} told to cancel")


async def test_a_cancel_while_execute_is_submitting_still_cancels_the_job(
    h: Harness, tmp_path: Path
) -> None:
    await h.apply(remote(tmp_path, polls=100000, extra=", submit_sleep: 1.0", name="slow"))
    run = await h.run("slow")
    async with h.workers(1):
        ref = await _submitted_one(tmp_path)
        await h.cancel(run.run_id)
        await _told(tmp_path, ref)
    [job] = await h.attempts(run.run_id, "job")
    assert job["status"] == "cancelled" and job["handle"]["ref"] == ref


async def test_a_cancel_the_remote_refused_is_told_again(h: Harness, tmp_path: Path) -> None:
    await h.apply(remote(tmp_path, polls=100000, extra=", cancel_errors: 2", name="deaf"))
    run = await h.run("deaf")
    async with h.workers(1):
        ref = await _submitted_one(tmp_path)
        await h.cancel(run.run_id)
        # The canceller's try and the sweeper's first retry fail; a later sweep tells it
        # and then (after the remote answered, so the test waits for it) ends the debt.
        await _told(tmp_path, ref)

        async def debt_ended() -> bool:
            [job] = await h.attempts(run.run_id, "job")
            return job["remote_cancelled_at"] is not None

        await eventually(debt_ended, timeout=15, what="the cancel debt ended")
    assert kinds(tmp_path).count("cancel-error") == 2
    [job] = await h.attempts(run.run_id, "job")
    assert job["remote_cancel_tries"] == 3


async def test_a_remote_that_never_accepts_the_cancel_is_given_up_on_the_run_log(
    h: Harness, tmp_path: Path
) -> None:
    await h.apply(remote(tmp_path, polls=100000, extra=", cancel_errors: 100", name="gone"))
    run = await h.run("gone")
    async with h.workers(1):

        async def parked() -> bool:
            return [a["status"] for a in await h.attempts(run.run_id)] == ["waiting"]

        await eventually(parked, timeout=15, what="the attempt waiting")
    # No sweeper runs now: every try below is this test's own.
    await h.cancel(run.run_id)

    async def given_up() -> bool:
        await tell_owed_remotes(
            h.pool, catalog=h.catalog, storage=h.storage, max_tries=3, first_backoff=0.05
        )
        [job] = await h.attempts(run.run_id, "job")
        return job["remote_cancelled_at"] is not None

    await eventually(given_up, timeout=15, what="the cancel debt given up")
    [job] = await h.attempts(run.run_id, "job")
    assert job["remote_cancel_tries"] == 3
    assert kinds(tmp_path).count("cancel-error") == 3 and "cancel" not in kinds(tmp_path)
    [line] = [e for e in await h.logs(run.run_id) if "could not be told" in e["message"]]
    assert line["level"] == "error" and line["step"] == "job"
    assert f"remote job {job['handle']['ref']}" in line["message"]


LOCK_WAITS = """SELECT count(*) FROM pg_stat_activity
                WHERE datname = current_database() AND wait_event_type = 'Lock'"""


async def test_the_canceller_waits_for_a_worker_writing_the_attempt_then_tells_it(
    h: Harness, tmp_path: Path
) -> None:
    await h.apply(remote(tmp_path, polls=100000, name="busy"))
    run = await h.run("busy")
    async with h.workers(1):
        ref = await _submitted_one(tmp_path)

        async def parked() -> bool:
            return [a["status"] for a in await h.attempts(run.run_id)] == ["waiting"]

        await eventually(parked, timeout=15, what="the attempt waiting")
    [job] = await h.attempts(run.run_id)
    await in_transaction(
        h.pool, lambda c: runs_store.cancel_run(c, run.run_id, reason="test", versions=h.versions)
    )
    # A worker's write (a probe result it will discard, a heartbeat) holds the row a moment.
    async with h.pool.acquire() as worker, worker.transaction():
        await worker.execute(
            "SELECT 1 FROM step_attempts WHERE id = $1 FOR NO KEY UPDATE", job["id"]
        )
        telling = asyncio.create_task(
            tell_owed_remotes(h.pool, catalog=h.catalog, storage=h.storage, run_id=run.run_id)
        )

        async def lock_waits() -> int:
            assert not telling.done(), "the canceller skipped the row and left it to a sweep"
            return int(await h.fetchval(LOCK_WAITS))

        await eventually(
            lock_waits, lambda n: n >= 1, timeout=10, what="the canceller waiting for the row"
        )
        assert not telling.done()
    assert await telling == 1
    assert ref in await cancelled_refs(tmp_path)
