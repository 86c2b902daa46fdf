"""The runs facet: start, cancel and retry runs, and read what they did.

Every read of one run first checks the run belongs to the namespace asked about: a run of
another namespace is answered exactly like a run that does not exist.
"""

from __future__ import annotations

import json

from dirigent.engine.door.paging import checked_limit, page_of
from dirigent.engine.door.parts import Parts, answerable
from dirigent.engine.infrastructure.artifacts import ArtifactContent
from dirigent.engine.runtime import cancelling
from dirigent.engine.shapes.views import (
    ArtifactView,
    AttemptView,
    FailureView,
    ItemView,
    LogView,
    NotificationView,
    Page,
    RunDetail,
    RunSummary,
    decode_key,
    encode_cursor,
)
from dirigent.engine.store.pool import Connection
from dirigent.engine.store.queries import api_reads, reads
from dirigent.engine.store.queries.reads import RunFilter
from dirigent.engine.store.transactions import retrying, runs
from dirigent.engine.store.transactions.retrying import ManualRetry
from dirigent.engine.store.transactions.runs import RunCreated, RunRequest


class Runs:
    def __init__(self, parts: Parts) -> None:
        self._p = parts

    # --- writes ----------------------------------------------------------------------

    async def start(self, request: RunRequest) -> RunCreated:
        """Create a run of the pipeline's current version (params checked, grid drawn)."""
        created = await self._p.tx(lambda c: self._p.create_run(c, request))
        self._p.count_started(request, created)
        return created

    async def start_many(self, requests: list[RunRequest]) -> list[RunCreated]:
        """Create several runs in one transaction: workers see all of them at once, or none."""

        async def create_all(conn: Connection) -> list[RunCreated]:
            return await runs.create_runs(
                conn,
                requests,
                versions=self._p.versions,
                catalog=self._p.catalog,
                enabled_unsafe=self._p.enabled_unsafe,
            )

        made = await self._p.tx(create_all)
        for request, created in zip(requests, made, strict=True):
            self._p.count_started(request, created)
        return made

    async def cancel(self, namespace: str, run_id: int, *, reason: str) -> int:
        """Cancel in one transaction, then tell remote work; returns how many remotes were told."""
        await self._p.require_run(namespace, run_id)
        with answerable():  # the runtime's own transaction, outside Parts.tx
            return await cancelling.cancel_run(
                self._p.db.pool,
                run_id,
                reason=reason,
                catalog=self._p.catalog,
                storage=self._p.storage,
                versions=self._p.versions,
                sealer=self._p.sealer,
            )

    async def retry(
        self, namespace: str, run_id: int, step: str, *, idempotency_key: str
    ) -> ManualRetry:
        """One more try of a failed step, or of exactly its failed items."""
        await self._p.require_run(namespace, run_id)
        return await self._p.tx(
            lambda c: retrying.retry_step(
                c, run_id, step, idempotency_key=idempotency_key, versions=self._p.versions
            )
        )

    # --- reads -----------------------------------------------------------------------

    async def page(
        self,
        namespace: str,
        where: RunFilter | None = None,
        *,
        cursor: str | None = None,
        limit: int = 100,
    ) -> Page[RunSummary]:
        before = decode_key(cursor, int)
        rows = await self._p.read(
            lambda c: reads.run_summaries(
                c, namespace, where or RunFilter(), before_id=before, limit=checked_limit(limit)
            )
        )
        return page_of(rows, limit, lambda r: (r.id,))

    async def get(self, namespace: str, run_id: int) -> RunDetail | None:
        return await self._p.read(lambda c: reads.run_detail(c, namespace, run_id))

    async def status(self, namespace: str, run_id: int) -> str | None:
        """A run's status alone: what a stream checks each cycle, one indexed row."""
        return await self._p.read(lambda c: api_reads.run_status(c, namespace, run_id))

    async def end_cursor(self, namespace: str, run_id: int) -> str | None:
        """The cursor of the run's last event once the run has ended; None while in flight."""
        await self._p.require_run(namespace, run_id)
        found = await self._p.read(lambda c: api_reads.run_end_position(c, run_id))
        return None if found is None else encode_cursor(*found)

    async def items(
        self, namespace: str, run_id: int, step: str, *, cursor: str | None = None, limit: int = 100
    ) -> Page[ItemView]:
        await self._p.require_run(namespace, run_id)
        after = decode_key(cursor, int)
        rows = await self._p.read(
            lambda c: reads.items_page(c, run_id, step, after=after, limit=checked_limit(limit))
        )
        return page_of(rows, limit, lambda r: (r.index,))

    async def attempts(
        self,
        namespace: str,
        run_id: int,
        step: str | None = None,
        *,
        cursor: str | None = None,
        limit: int = 100,
    ) -> Page[AttemptView]:
        await self._p.require_run(namespace, run_id)
        after = decode_key(cursor, int)
        rows = await self._p.read(
            lambda c: reads.attempts_page(c, run_id, step, after=after, limit=checked_limit(limit))
        )
        return page_of(rows, limit, lambda r: (r.id,))

    async def logs(
        self, namespace: str, run_id: int, *, cursor: str | None = None, limit: int = 500
    ) -> Page[LogView]:
        """Log lines after the cursor. ``next`` is always set: following a log never ends."""
        await self._p.require_run(namespace, run_id)
        after = decode_key(cursor, int)
        rows = await self._p.read(
            lambda c: reads.logs_page(c, run_id, after=after, limit=checked_limit(limit))
        )
        last = rows[-1].id if rows else after
        return Page(items=rows, next=encode_cursor(last) if last is not None else cursor)

    async def failures(self, namespace: str, run_id: int) -> list[FailureView]:
        await self._p.require_run(namespace, run_id)
        return await self._p.read(lambda c: reads.failures(c, run_id))

    async def notifications(self, namespace: str, run_id: int) -> list[NotificationView]:
        await self._p.require_run(namespace, run_id)
        return await self._p.read(lambda c: reads.notifications(c, run_id))

    async def report(self, namespace: str, run_id: int) -> str | None:
        """The run's markdown report, when its pipeline declares one and it rendered."""
        await self._p.require_run(namespace, run_id)
        return await self._p.read(lambda c: reads.report(c, run_id))

    async def artifacts(
        self, namespace: str, run_id: int, *, cursor: str | None = None, limit: int = 100
    ) -> Page[ArtifactView]:
        await self._p.require_run(namespace, run_id)
        after = decode_key(cursor, int)
        rows = await self._p.read(
            lambda c: api_reads.artifacts(c, run_id, after=after, limit=checked_limit(limit))
        )
        return page_of(rows, limit, lambda r: (r.id,))

    async def artifact(
        self, namespace: str, run_id: int, artifact_id: int
    ) -> tuple[ArtifactView, ArtifactContent] | None:
        """An artifact's metadata and its content, not yet opened (inline JSON, or stored).

        ``content.open(offset, length)`` opens a byte range before it yields, so a caller
        answering over HTTP learns of a missing object (``ObjectNotFound``), a range past the
        end (``InvalidRange``) or a store that does not answer (``StorageUnavailable``)
        before it has promised a status; nothing is opened until then.
        """
        found = await self._p.read(lambda c: api_reads.artifact(c, namespace, run_id, artifact_id))
        if found is None:
            return None
        view, inline, uri = found
        if uri is None:
            # The bytes the worker measured and hashed when it stored the value inline.
            data = json.dumps(inline, sort_keys=True, separators=(",", ":")).encode()
            return view, ArtifactContent.inline(data, view.content_type)
        return view, ArtifactContent.stored(self._p.storage, uri)
