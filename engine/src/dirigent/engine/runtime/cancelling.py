"""Cancelling a run: one transaction settles it, then remote work is told, best-effort.

The transaction (``store.runs.cancel_run``) is what cancels: queued, waiting and running
attempts become cancelled and the run settles as cancelled, together. Telling a remote
system to stop comes after and may fail — ``cancel`` is best-effort and idempotent by
contract — so a failure there is logged, never allowed to undo the cancellation.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import asyncpg
import structlog

from dirigent.engine.plugins import Catalog
from dirigent.engine.runtime.context import EngineContext
from dirigent.engine.storage import FileStorage
from dirigent.engine.store import runs as runs_store
from dirigent.engine.store.pool import in_transaction
from dirigent.engine.store.versions import VersionCache
from dirigent.sdk import Operator, RemoteHandle

log = structlog.get_logger("dirigent.cancel")


async def cancel_run(
    pool: asyncpg.Pool,
    run_id: int,
    *,
    reason: str,
    catalog: Catalog,
    storage: FileStorage,
    versions: VersionCache,
    remote_timeout: float = 10.0,
) -> int:
    """Cancel a run; returns how many remote handles were told to cancel."""

    async def settle(conn: asyncpg.Connection) -> tuple[list[dict[str, Any]], str, str]:
        handles = await runs_store.cancel_run(conn, run_id, reason=reason, versions=versions)
        row = await conn.fetchrow(
            "SELECT r.namespace, p.name FROM runs r JOIN pipelines p ON p.id = r.pipeline_id WHERE r.id = $1",
            run_id,
        )
        return handles, row["namespace"], row["name"]

    handles, namespace, pipeline = await in_transaction(pool, settle)
    told = 0
    for h in handles:
        entry = catalog.block(h["block"])
        if entry is None or not isinstance(entry.block, Operator):
            continue
        try:
            handle = RemoteHandle.model_validate(h["handle"])
            config = entry.block.config_model.model_validate(h["input"] or {})
            ctx = EngineContext(
                namespace=namespace,
                pipeline=pipeline,
                run_id=run_id,
                step=h["step"],
                attempt=0,
                attempt_id=h["id"],
                run_item_id=None,
                item=None,
                started_at=dt.datetime.now(dt.UTC),
                cursor=None,
                params={},
                storage=storage,
            )
            await asyncio.wait_for(entry.block.cancel(handle, config, ctx), remote_timeout)
            told += 1
        except Exception:
            log.exception(
                "cancel.remote_failed", run_id=run_id, attempt_id=h["id"], block=h["block"]
            )
    return told
