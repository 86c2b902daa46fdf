"""Worker metrics, in a registry of the worker's own (no process-global collectors).

Names follow Prometheus conventions and are what dashboards and alert rules may reference.
Levels that need a count over the database (queue depth, waiting) are sampled by the
sweeper, never on the claim path: the claim is the hot path and telemetry adds nothing to it.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from dirigent.engine.infrastructure.trigger_metrics import RunMetrics

_DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class WorkerMetrics:
    """Everything a worker process reports."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.attempts = Counter(
            "dirigent_attempts",
            "Attempts a worker finished, by block and outcome "
            "(succeeded, failed, skipped, parked, discarded).",
            ["block", "outcome"],
            registry=r,
        )
        self.attempt_duration = Histogram(
            "dirigent_attempt_duration_seconds",
            "From claim to a recorded outcome, by block.",
            ["block"],
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.claim_latency = Histogram(
            "dirigent_claim_latency_seconds",
            "From an attempt falling due to a worker claiming it.",
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.in_flight = Gauge(
            "dirigent_worker_in_flight", "Attempts this worker holds right now.", registry=r
        )
        self.lease_recoveries = Counter(
            "dirigent_lease_recoveries",
            "Attempts whose expired lease the sweeper recovered.",
            registry=r,
        )
        self.runs_finished = Counter(
            "dirigent_runs_finished",
            "Runs finished by this worker, by pipeline and state.",
            ["namespace", "pipeline", "state"],
            registry=r,
        )
        self.queue_depth = Gauge(
            "dirigent_queue_depth", "Queued attempts due now (sampled by the sweeper).", registry=r
        )
        self.waiting = Gauge(
            "dirigent_waiting_attempts",
            "Attempts parked as waiting (sampled by the sweeper).",
            registry=r,
        )
        # Runs a step starts (``pipeline.run``) are created here, on the worker path: they
        # count in the same ``dirigent_runs_started`` as every other door (trigger=pipeline).
        self.runs_started = RunMetrics(r)

    def serve(self, port: int, addr: str = "0.0.0.0") -> None:
        """Serve /metrics on its own port (not the API's), in a background thread."""
        start_http_server(port, addr=addr, registry=self.registry)
