"""Remote work under failure: a probe or fetch error keeps the handle, and every path that
ends an attempt holding a handle tells the remote to cancel."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from dirigent.engine.runtime.cancelling import cancel_run, tell_owed_remotes
from dirigent.engine.store.pool import in_transaction
from dirigent.engine.store.transactions import runs as runs_store
from tests.integration.engine.harness import Harness
from tests.waiting import eventually


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


async def wait_for(check: Callable[[], Awaitable[object]], timeout: float = 15.0) -> None:
    await eventually(check, timeout=timeout)


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

        await wait_for(parked)
        [ref] = await submitted(tmp_path)
        second = await h.run("replace")
        assert second.replaced == (first.run_id,)

        async def told() -> bool:
            return ref in await cancelled_refs(tmp_path)

        await wait_for(told)


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

        await wait_for(told)


async def _cancel(h: Harness, run_id: int) -> None:
    await cancel_run(
        h.pool, run_id, reason="test", catalog=h.catalog, storage=h.storage, versions=h.versions
    )


async def _submitted_one(tmp: Path) -> str:
    """The ref of the one job submitted, once it is."""

    async def submitting() -> bool:
        return bool(await submitted(tmp))

    await wait_for(submitting)
    [ref] = await submitted(tmp)
    return ref


async def _told(tmp: Path, ref: str) -> None:
    async def told() -> bool:
        return ref in await cancelled_refs(tmp)

    await wait_for(told)


async def test_a_cancel_while_execute_is_submitting_still_cancels_the_job(
    h: Harness, tmp_path: Path
) -> None:
    await h.apply(remote(tmp_path, polls=100000, extra=", submit_sleep: 1.0", name="slow"))
    run = await h.run("slow")
    async with h.workers(1):
        ref = await _submitted_one(tmp_path)
        await _cancel(h, run.run_id)
        await _told(tmp_path, ref)
    [job] = await h.attempts(run.run_id, "job")
    assert job["status"] == "cancelled" and job["handle"]["ref"] == ref


async def test_a_cancel_the_remote_refused_is_told_again(h: Harness, tmp_path: Path) -> None:
    await h.apply(remote(tmp_path, polls=100000, extra=", cancel_errors: 2", name="deaf"))
    run = await h.run("deaf")
    async with h.workers(1):
        ref = await _submitted_one(tmp_path)
        await _cancel(h, run.run_id)
        # The canceller's try and the sweeper's first retry fail; a later sweep tells it
        # and then (after the remote answered, so the test waits for it) ends the debt.
        await _told(tmp_path, ref)

        async def debt_ended() -> bool:
            [job] = await h.attempts(run.run_id, "job")
            return job["remote_cancelled_at"] is not None

        await wait_for(debt_ended)
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

        await wait_for(parked)
    # No sweeper runs now: every try below is this test's own.
    await _cancel(h, run.run_id)

    async def given_up() -> bool:
        await tell_owed_remotes(
            h.pool, catalog=h.catalog, storage=h.storage, max_tries=3, first_backoff=0.05
        )
        [job] = await h.attempts(run.run_id, "job")
        return job["remote_cancelled_at"] is not None

    await wait_for(given_up)
    [job] = await h.attempts(run.run_id, "job")
    assert job["remote_cancel_tries"] == 3
    assert kinds(tmp_path).count("cancel-error") == 3 and "cancel" not in kinds(tmp_path)
    [line] = [e for e in await h.logs(run.run_id) if "could not be told" in e["message"]]
    assert line["level"] == "error" and line["step"] == "job"
    assert f"remote job {job['handle']['ref']}" in line["message"]


async def test_the_canceller_waits_for_a_worker_writing_the_attempt_then_tells_it(
    h: Harness, tmp_path: Path
) -> None:
    await h.apply(remote(tmp_path, polls=100000, name="busy"))
    run = await h.run("busy")
    async with h.workers(1):
        ref = await _submitted_one(tmp_path)

        async def parked() -> bool:
            return [a["status"] for a in await h.attempts(run.run_id)] == ["waiting"]

        await wait_for(parked)
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
        await asyncio.sleep(0.3)
        assert not telling.done(), "the canceller skipped the row and left it to a sweep"
    assert await telling == 1
    assert ref in await cancelled_refs(tmp_path)
