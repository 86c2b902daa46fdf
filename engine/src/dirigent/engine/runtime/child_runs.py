"""``ctx.runs``: a step starts, watches and cancels runs of its own instance.

Why in the engine: ``pipeline.run`` needs exactly three things, and a block calling its own
instance over HTTP would need a credential to it. Starting and cancelling are the store's
verbs (``store.lineage.start_child_run`` / ``cancel_child_run``: the depth guard, then the
same ``create_run`` / ``cancel_run`` every door uses), each in a transaction of its own (a child run that is not
committed is one no worker ever sees). The child is attributed to the parent run
(``parent_run_id``, a foreign key) and step (``triggered_by_ref`` = ``<run>/<step>``), and
its idempotency key is the parent attempt, so a replayed ``execute`` finds the child it
started instead of starting a second. The depth guard reads the parent chain from the rows.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from contextlib import AbstractAsyncContextManager

from dirigent.engine.infrastructure.plugins import Catalog
from dirigent.engine.infrastructure.trigger_metrics import RunMetrics
from dirigent.engine.shapes.problems import ProblemsError
from dirigent.engine.shapes.statuses import RUN_TERMINAL
from dirigent.engine.store.pool import Connection
from dirigent.engine.store.transactions import lineage
from dirigent.engine.store.transactions.runs import RunRequest
from dirigent.engine.store.transactions.versions import VersionCache
from dirigent.sdk import BlockFailure, ErrorClass, JsonValue, Message, RunSnapshot, StartedRun

ConnFactory = Callable[[], AbstractAsyncContextManager[Connection]]
CancelRemotes = Callable[[int], Awaitable[int]]
"""Tells the remote work of a cancelled child run to stop (by the child's run id).

Without one, the sweeper's pass over owed remote cancels tells it a little later."""

TOO_DEEP = Message(
    "engine.runs.too_deep",
    "starting '{pipeline}' would make a chain of {depth} runs, deeper than the limit "
    "{max_depth}; a pipeline may be starting itself",
)
REFUSED = Message("engine.runs.refused", "run of '{pipeline}' was refused: {why}")


class StepRuns:
    """The ``Runs`` a step gets: scoped to its namespace, attributed to its run and step."""

    def __init__(
        self,
        conn_factory: ConnFactory,
        *,
        catalog: Catalog,
        namespace: str,
        run_id: int,
        step: str,
        attempt_id: int,
        enabled_unsafe: Collection[str] = (),
        cancel_remotes: CancelRemotes | None = None,
        metrics: RunMetrics | None = None,
    ) -> None:
        self._conn = conn_factory
        self._catalog = catalog
        self._namespace = namespace
        self._run_id = run_id
        self._step = step
        self._attempt_id = attempt_id
        self._enabled_unsafe = enabled_unsafe
        self._cancel_remotes = cancel_remotes
        self._metrics = metrics
        self._versions = VersionCache()

    async def start(
        self, pipeline: str, params: Mapping[str, JsonValue], *, max_depth: int
    ) -> StartedRun:
        request = RunRequest(
            self._namespace,
            pipeline,
            dict(params),
            triggered_by_kind="pipeline",
            triggered_by_ref=f"{self._run_id}/{self._step}",
            parent_run_id=self._run_id,
            idempotency_key=f"parent-attempt:{self._attempt_id}",
        )
        try:
            async with self._conn() as conn, conn.transaction():
                created = await lineage.start_child_run(
                    conn,
                    request,
                    max_depth=max_depth,
                    versions=self._versions,
                    catalog=self._catalog,
                    enabled_unsafe=self._enabled_unsafe,
                )
        except lineage.ChainTooDeep as err:
            raise BlockFailure(
                TOO_DEEP,
                error_class=ErrorClass.REJECTED,
                pipeline=pipeline,
                depth=err.depth,
                max_depth=max_depth,
            ) from err
        except ProblemsError as err:
            why = "; ".join(p.message for p in err.problems)
            raise BlockFailure(
                REFUSED, error_class=ErrorClass.REJECTED, pipeline=pipeline, why=why
            ) from err
        if created.created and self._metrics is not None:  # counted once, after the commit
            self._metrics.started(self._namespace, pipeline, "pipeline")
        return StartedRun(
            run_id=created.run_id,
            namespace=self._namespace,
            pipeline=pipeline,
            state=created.status,
        )

    async def snapshot(self, run_id: int) -> RunSnapshot | None:
        async with self._conn() as conn:
            row = await lineage.child_run(conn, run_id, self._namespace)
        if row is None:
            return None
        return RunSnapshot(
            run_id=row["id"],
            namespace=row["namespace"],
            pipeline=row["pipeline"],
            state=row["status"],
            terminal=row["status"] in RUN_TERMINAL,
            started_at=row["started_at"],
            finished_at=row["finished_at"],
            message=row["error_message"],
            failed_step=row["failed_step"],
            outputs=row["outputs"],
        )

    async def cancel(self, run_id: int, *, reason: str) -> bool:
        async with self._conn() as conn, conn.transaction():
            cancelled = await lineage.cancel_child_run(
                conn, run_id, self._namespace, reason=reason, versions=self._versions
            )
        if not cancelled:
            return False
        if self._cancel_remotes is not None:
            await self._cancel_remotes(run_id)
        return True
