"""Alert delivery: queued notifications sent through the notifiers of the plugin catalog.

Runs inside every worker beside the claim loop. Nothing about a channel is on the outcome
path: a notifier that hangs costs a lease and a retry, never a blocked transaction. A
notifier raises on refusal (the row owns the retry budget); the delay doubles per attempt
from ``backoff``, and once ``attempts`` are spent the row is ``failed`` for good. The same
loop recovers expired leases and raises RunStuck for runs the sweeper flagged.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
from dataclasses import dataclass
from typing import Any, Literal

import structlog
from pydantic import ValidationError

from dirigent.engine.infrastructure.crypto import SecretSealer
from dirigent.engine.infrastructure.plugins import Catalog
from dirigent.engine.infrastructure.trigger_metrics import NotificationMetrics
from dirigent.engine.store.pool import DATABASE_ERRORS, Pool, in_transaction
from dirigent.engine.store.transactions import alerts
from dirigent.engine.store.transactions.alerts import Claimed
from dirigent.engine.store.transactions.connections import open_connection
from dirigent.engine.store.transactions.versions import VersionCache
from dirigent.sdk import NotificationMessage
from dirigent.sdk.secrets import redact, validation_summary

log = structlog.get_logger("dirigent.notify")

_SEVERITY: dict[str, Literal["info", "warning", "error"]] = {
    "run_failed": "error",
    "run_stuck": "warning",
    "run_completed_with_errors": "warning",
}


@dataclass
class DeliveryConfig:
    owner: str
    poll_interval: float = 1.0
    sweep_interval: float = 5.0
    lease: dt.timedelta = dt.timedelta(seconds=30)
    backoff: dt.timedelta = dt.timedelta(seconds=10)
    attempts: int = 5
    concurrency: int = 4


class Deliverer:
    def __init__(
        self,
        pool: Pool,
        catalog: Catalog,
        sealer: SecretSealer | None,
        config: DeliveryConfig,
        metrics: NotificationMetrics | None = None,
    ) -> None:
        self.pool = pool
        self.catalog = catalog
        self.sealer = sealer
        self.config = config
        self.metrics = metrics or NotificationMetrics()
        self.versions = VersionCache()
        self._stopping = asyncio.Event()

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        last_sweep = 0.0
        while not self._stopping.is_set():
            try:
                if time.monotonic() - last_sweep >= self.config.sweep_interval:
                    last_sweep = time.monotonic()
                    await self.sweep()
                sent = await self.deliver_due()
            except DATABASE_ERRORS:
                log.exception("notify.loop_failed")
                sent = 0
            if sent:
                continue
            await self._sleep(await self._wait())

    async def sweep(self) -> None:
        async with self.pool.acquire() as conn:
            await alerts.recover(conn)
        await in_transaction(self.pool, lambda c: alerts.raise_stuck(c, self.versions))

    async def deliver_due(self) -> int:
        async with self.pool.acquire() as conn:
            claimed = await alerts.claim(
                conn,
                self.config.owner,
                limit=self.config.concurrency,
                lease=self.config.lease,
                budget=self.config.attempts,
            )
        await asyncio.gather(*(self._deliver(n) for n in claimed))
        return len(claimed)

    async def _deliver(self, n: Claimed) -> None:
        try:
            secrets: set[str] = set()
            await asyncio.wait_for(self._send(n, secrets), self.config.lease.total_seconds() * 0.8)
        except Exception as err:  # a channel's failure, whatever it is, spends one attempt
            # The connection's secrets (a webhook URL, a token) never reach the row or a log.
            if isinstance(err, ValidationError):
                said = validation_summary(err, secrets)
            else:
                said = redact(f"{type(err).__name__}: {err}", secrets)
            await self._failed(n, said)
            return
        async with self.pool.acquire() as conn:
            if await alerts.delivered(conn, n, self.config.owner):
                self.metrics.notifications.labels("delivered").inc()

    async def _send(self, n: Claimed, secrets: set[str]) -> None:
        notifier = self.catalog.notifiers.get(n.notifier)
        if notifier is None:
            raise LookupError(f"notifier '{n.notifier}' is not installed on this worker")
        values: dict[str, Any] = {}
        if n.connection is not None:
            async with self.pool.acquire() as conn:
                found = await open_connection(
                    conn, n.namespace, n.connection, self.sealer, secrets_out=secrets
                )
            if found is None:
                raise LookupError(f"connection '{n.connection}' does not exist in {n.namespace}")
            values = found
        config = type(notifier).config_model.model_validate(values)
        run = n.snapshot.get("run") or {}
        links = {"report": run["report_url"]} if run.get("report_url") else {}
        message = NotificationMessage(
            event=n.event,
            title=n.subject,
            body=n.body,
            severity=_SEVERITY.get(n.event, "info"),
            namespace=run.get("namespace"),
            pipeline=run.get("pipeline"),
            run_id=n.run_id,
            links=links,
            data={"rule": n.rule, "status": run.get("status"), "error": run.get("error")},
        )
        await notifier.send(message, config)

    async def _failed(self, n: Claimed, error: str) -> None:
        retry: dt.timedelta | None = None
        if n.attempts < n.max_attempts:
            retry = self.config.backoff * (2 ** (n.attempts - 1))
        async with self.pool.acquire() as conn:
            if await alerts.failed(conn, n, self.config.owner, error, retry):
                self.metrics.notifications.labels("retried" if retry else "failed").inc()
                log.warning("notify.failed", notification=n.id, error=error, retrying=bool(retry))

    async def _wait(self) -> float:
        async with self.pool.acquire() as conn:
            due = await alerts.next_due(conn)
        wait = self.config.poll_interval
        if due is not None:
            wait = min(wait, max(0.01, (due - dt.datetime.now(dt.UTC)).total_seconds()))
        return wait

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)
