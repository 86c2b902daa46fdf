"""Cancelling a run: one transaction finishes it, then remote work is told, best-effort.

The transaction (``store.runs.cancel_run``) is what cancels: queued, waiting and running
attempts become cancelled and the run finishes as cancelled, together. Telling a remote
system to stop comes after and may fail — ``cancel`` is best-effort and idempotent by
contract — so a failure there never undoes the cancellation: the debt stays in the outbox
and is taken again after a backoff, up to ``REMOTE_CANCEL_TRIES`` tries; the last failure is
logged on the run so someone can stop the remote by hand.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import structlog

from dirigent.engine.infrastructure.artifacts import ArtifactStore
from dirigent.engine.infrastructure.crypto import SecretSealer
from dirigent.engine.infrastructure.plugins import Catalog
from dirigent.engine.runtime.child_runs import StepRuns
from dirigent.engine.runtime.connecting import open_declared
from dirigent.engine.runtime.context import EngineContext, storage_connection
from dirigent.engine.store.pool import Connection, Pool, in_transaction
from dirigent.engine.store.transactions import runs as runs_store
from dirigent.engine.store.transactions.logs import log_run
from dirigent.engine.store.transactions.versions import VersionCache
from dirigent.sdk import Operator, RemoteHandle

log = structlog.get_logger("dirigent.cancel")

# About 25 minutes of tries with the doubling backoff (1 s, 2 s, ... capped at 5 minutes).
REMOTE_CANCEL_TRIES = 10


async def cancel_run(
    pool: Pool,
    run_id: int,
    *,
    reason: str,
    catalog: Catalog,
    storage: ArtifactStore,
    versions: VersionCache,
    remote_timeout: float = 10.0,
    sealer: SecretSealer | None = None,
) -> int:
    """Cancel a run; returns how many remote handles were told to cancel."""

    async def write(conn: Connection) -> None:
        await runs_store.cancel_run(conn, run_id, reason=reason, versions=versions)

    await in_transaction(pool, write)
    return await tell_owed_remotes(
        pool,
        catalog=catalog,
        storage=storage,
        run_id=run_id,
        remote_timeout=remote_timeout,
        sealer=sealer,
    )


async def tell_owed_remotes(
    pool: Pool,
    *,
    catalog: Catalog,
    storage: ArtifactStore,
    run_id: int | None = None,
    remote_timeout: float = 10.0,
    sealer: SecretSealer | None = None,
    max_tries: int = REMOTE_CANCEL_TRIES,
    first_backoff: float = 1.0,
) -> int:
    """Tell the remote of every cancelled attempt holding a handle to stop (the outbox).

    Called after a cancel (for its run) and by every sweeper pass (for any run), so a
    handle cancelled by FailFast, by Replace, or by a canceller that died is still told; one
    whose cancel failed is taken again after its backoff. Returns how many were told.
    """
    async with pool.acquire() as conn:
        owed = await runs_store.take_owed_remote_cancels(
            conn, run_id=run_id, first_backoff=first_backoff
        )

    async def cascade(child_run_id: int) -> int:
        # A cancelled step that started a child run (pipeline.run) cancels the child; the
        # child's own remote work is told here at once rather than at the next sweep.
        return await tell_owed_remotes(
            pool,
            catalog=catalog,
            storage=storage,
            run_id=child_run_id,
            remote_timeout=remote_timeout,
            sealer=sealer,
            max_tries=max_tries,
            first_backoff=first_backoff,
        )

    told = 0
    for h in owed:
        runs = StepRuns(
            pool.acquire,
            catalog=catalog,
            namespace=h["namespace"],
            run_id=h["run_id"],
            step=h["step"],
            attempt_id=h["id"],
            cancel_remotes=cascade,
        )
        accepted = await _tell(h, (catalog, storage, sealer), remote_timeout, runs, pool)
        await _close_debt(pool, h, accepted=accepted, max_tries=max_tries)
        told += int(accepted)
    return told


async def _close_debt(pool: Pool, h: dict[str, Any], *, accepted: bool, max_tries: int) -> None:
    """A told remote, or the last try spent, ends the debt; otherwise its lease brings it back."""
    if not accepted and h["tries"] < max_tries:
        return

    async def write(conn: Connection) -> None:
        await runs_store.told_remote_cancel(conn, h["id"])
        if not accepted:
            ref = (h["handle"] or {}).get("ref")
            await log_run(
                conn,
                h["run_id"],
                "error",
                f"{h['step']}: the remote job {ref} could not be told to cancel after "
                f"{h['tries']} tries; stop it by hand",
                {"attempt_id": h["id"], "ref": ref, "tries": h["tries"]},
                step=h["step"],
            )

    await in_transaction(pool, write)
    if not accepted:
        log.error("cancel.remote_abandoned", run_id=h["run_id"], attempt_id=h["id"])


async def _tell(
    h: dict[str, Any],
    having: tuple[Catalog, ArtifactStore, SecretSealer | None],
    limit: float,
    runs: StepRuns,
    pool: Pool,
) -> bool:
    """True once the remote accepted the cancel; False when it must be tried again."""
    catalog, storage, sealer = having
    entry = catalog.block(h["block"])
    if entry is None or not isinstance(entry.block, Operator):
        # Another worker may carry the block: the debt stays for the next try.
        log.warning("cancel.remote_block_missing", attempt_id=h["id"], block=h["block"])
        return False
    try:
        handle = RemoteHandle.model_validate(h["handle"])
        config = entry.block.config_model.model_validate(h["input"] or {})
        opened = await open_declared(
            pool.acquire, entry.block.spec, h["input"], h["namespace"], sealer
        )
        ctx = EngineContext(
            connections=opened,
            namespace=h["namespace"],
            pipeline=h["pipeline"],
            run_id=h["run_id"],
            step=h["step"],
            attempt=0,
            attempt_id=h["id"],
            run_item_id=h["run_item_id"],
            item=None,
            started_at=dt.datetime.now(dt.UTC),
            cursor=None,
            params={},
            storage=storage,
            storage_connection=storage_connection(h["input"], opened),
            runs=runs,
        )
        await asyncio.wait_for(entry.block.cancel(handle, config, ctx), limit)
    except Exception:
        log.exception(
            "cancel.remote_failed", run_id=h["run_id"], attempt_id=h["id"], tries=h["tries"]
        )
        return False
    log.info("cancel.remote_told", run_id=h["run_id"], attempt_id=h["id"], ref=handle.ref)
    return True
