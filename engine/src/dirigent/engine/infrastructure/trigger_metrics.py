"""Metrics of runs started, the scheduler, the webhook intake and alert delivery, each on a
given registry.

A process serves its own registry (``DIRIGENT_METRICS_PORT``); these classes only add their
collectors to it, so a worker's registry carries the notification counters beside its own,
and a ``dirigent api`` embedding the scheduler carries the scheduler's.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

_LAG_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 3600)


class SchedulerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.firings = Counter(
            "dirigent_scheduler_firings",
            "Schedule firings, by result (fired: a run was created; failed: it was refused).",
            ["result"],
            registry=self.registry,
        )
        self.misfires = Counter(
            "dirigent_scheduler_misfires",
            "Firings later than the misfire grace (fired once, clock recomputed from now).",
            registry=self.registry,
        )
        self.lag = Histogram(
            "dirigent_scheduler_lag_seconds",
            "From the slot a firing owed to the moment it fired.",
            buckets=_LAG_BUCKETS,
            registry=self.registry,
        )


class WebhookMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.deliveries = Counter(
            "dirigent_webhook_deliveries",
            "Webhook deliveries, by result (accepted, refused).",
            ["result"],
            registry=self.registry,
        )
        self.refusals = Counter(
            "dirigent_webhook_refusals",
            "Refused webhook deliveries, by reason (the problem code).",
            ["reason"],
            registry=self.registry,
        )


class NotificationMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.notifications = Counter(
            "dirigent_notifications",
            "Alert deliveries, by outcome (delivered, retried, failed).",
            ["outcome"],
            registry=self.registry,
        )


class RunMetrics:
    """Runs started, counted by the engine after the transaction that created them commits."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.runs_started = Counter(
            "dirigent_runs_started",
            "Runs created, by pipeline and trigger "
            "(api, cli, schedule, webhook, backfill, pipeline: started by a step).",
            ["namespace", "pipeline", "trigger"],
            registry=self.registry,
        )

    def started(self, namespace: str, pipeline: str, trigger: str) -> None:
        self.runs_started.labels(namespace, pipeline, trigger).inc()
