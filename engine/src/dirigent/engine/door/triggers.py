"""The triggers facet: schedules, webhooks and backfills, and the processes behind them.

The scheduler and the webhook intake create runs inside their own transactions through the
same ``Parts.create_run`` the runs facet uses, so a run has one way to be born.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from typing import Any

from dirigent.engine.door.intake import HookAnswer, WebhookIntake
from dirigent.engine.door.paging import checked_limit, page_of
from dirigent.engine.door.parts import Parts, answerable
from dirigent.engine.infrastructure.trigger_metrics import SchedulerMetrics, WebhookMetrics
from dirigent.engine.runtime.scheduling import Scheduler, SchedulerConfig
from dirigent.engine.shapes.views import (
    BackfillRequest,
    BackfillResult,
    DeliveryView,
    FiringView,
    Page,
    ScheduleView,
    WebhookView,
    decode_key,
)
from dirigent.engine.store.pool import Connection, asyncpg_dsn
from dirigent.engine.store.queries import reads
from dirigent.engine.store.transactions import backfill as backfill_store
from dirigent.engine.store.transactions import schedules as schedules_store


class _Planned(Exception):
    """Raised inside a dry-run backfill so that no run it created is kept."""

    def __init__(self, result: BackfillResult) -> None:
        self.result = result


class Triggers:
    def __init__(self, parts: Parts) -> None:
        self._p = parts
        self._scheduler_metrics: SchedulerMetrics | None = None
        self._intake: WebhookIntake | None = None

    def scheduler(self, **overrides: Any) -> Scheduler:
        """The scheduler on this engine's pool; it leads only while it holds the lock."""
        settings = self._p.settings
        config = SchedulerConfig(
            tick=settings.scheduler_tick,
            grace=settings.scheduler_misfire_grace,
            catch_up=settings.scheduler_catch_up,
        )
        config = dataclasses.replace(config, **overrides)
        if self._scheduler_metrics is None:  # one set of collectors per registry
            self._scheduler_metrics = SchedulerMetrics(self._p.registry)
        return Scheduler(
            self._p.db.pool,
            asyncpg_dsn(self._p.db.direct_url),
            self._p.create_run,
            config,
            metrics=self._scheduler_metrics,
            runs=self._p.run_metrics,
        )

    async def receive_webhook(
        self, token: str, *, headers: Mapping[str, str], body: AsyncIterator[bytes]
    ) -> HookAnswer:
        """One delivery to ``/hooks/{token}``: 202 with the run id, or a refusal (recorded)."""
        if self._intake is None:
            self._intake = WebhookIntake(
                self._p.db,
                self._p.sealer,
                self._p.create_run,
                max_body=self._p.settings.webhook_max_body,
                metrics=WebhookMetrics(self._p.registry),
                runs=self._p.run_metrics,
            )
        with answerable():
            return await self._intake.receive(token, headers, body)

    async def backfill(
        self, namespace: str, pipeline: str, request: BackfillRequest
    ) -> BackfillResult:
        """One run per window of a schedule in ``[start, end)``; a dry run keeps none."""
        dry_run = request.dry_run

        async def write(conn: Connection) -> BackfillResult:
            result = await backfill_store.backfill(
                conn,
                namespace,
                pipeline,
                schedule=request.schedule,
                start=request.start,
                end=request.end,
                params=request.params,
                create=self._p.create_run,
                dry_run=dry_run,
            )
            if dry_run:
                raise _Planned(result)
            return result

        try:
            result = await self._p.tx(write)
        except _Planned as planned:
            return planned.result
        for window in result.windows:
            if window.run_id is not None:
                self._p.run_metrics.started(namespace, pipeline, "backfill")
        return result

    async def set_schedule_paused(self, namespace: str, name: str, paused: bool) -> bool:
        """Pause, or resume from now (nothing missed is replayed); False when not found."""
        now = datetime.now(UTC)
        grace = self._p.settings.scheduler_misfire_grace
        return await self._p.tx(
            lambda c: schedules_store.set_paused(c, namespace, name, paused, now=now, grace=grace)
        )

    async def schedules(
        self, namespace: str, *, cursor: str | None = None, limit: int = 100
    ) -> Page[ScheduleView]:
        after = decode_key(cursor, str)
        rows = await self._p.read(
            lambda c: reads.schedules(c, namespace, after=after, limit=checked_limit(limit))
        )
        return page_of(rows, limit, lambda r: (r.name,))

    async def schedule(self, namespace: str, name: str) -> ScheduleView | None:
        found = await self._p.read(
            lambda c: reads.schedules(c, namespace, after=None, limit=1, only=name)
        )
        return found[0] if found else None

    async def firings(self, namespace: str, name: str, *, limit: int = 100) -> list[FiringView]:
        return await self._p.read(lambda c: reads.firings(c, namespace, name, checked_limit(limit)))

    async def webhooks(
        self, namespace: str, *, cursor: str | None = None, limit: int = 100
    ) -> Page[WebhookView]:
        """Webhooks by name; a webhook's token is never shown, only its prefix in ``path``."""
        after = decode_key(cursor, str)
        rows = await self._p.read(
            lambda c: reads.webhooks(c, namespace, after=after, limit=checked_limit(limit))
        )
        return page_of(rows, limit, lambda r: (r.name,))

    async def webhook(self, namespace: str, name: str) -> WebhookView | None:
        found = await self._p.read(
            lambda c: reads.webhooks(c, namespace, after=None, limit=1, only=name)
        )
        return found[0] if found else None

    async def deliveries(
        self, namespace: str, name: str, *, limit: int = 100
    ) -> list[DeliveryView]:
        return await self._p.read(
            lambda c: reads.deliveries(c, namespace, name, checked_limit(limit))
        )
