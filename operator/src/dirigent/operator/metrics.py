"""Operator metrics, in a registry of the operator's own (no process-global collectors).

Names are the ones agreed for every dashboard: reconciles by kind and result (ok, invalid,
error), reconcile duration by kind, and resources by kind and Ready state. The last is a
level kept from what the operator itself last wrote, so it needs no list call to compute.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

__all__ = ["OperatorMetrics"]

_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class OperatorMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.reconciles = Counter(
            "dirigent_operator_reconciles",
            "Reconciles of a resource into the engine, by kind and result (ok, invalid, error).",
            ["kind", "result"],
            registry=r,
        )
        self.duration = Histogram(
            "dirigent_operator_reconcile_duration_seconds",
            "Time from handler start to the engine's answer, by kind.",
            ["kind"],
            buckets=_BUCKETS,
            registry=r,
        )
        self.resources = Gauge(
            "dirigent_operator_resources",
            "Resources the operator reconciles, by kind and Ready state (True, False).",
            ["kind", "ready"],
            registry=r,
        )
        self.leader = Gauge(
            "dirigent_operator_leader",
            "1 while this operator holds the Lease and reconciles; 0 while it stands by.",
            registry=r,
        )
        self.feedback_restarts = Counter(
            "dirigent_operator_feedback_restarts",
            "Times the status feedback loop failed and was restarted, by error type.",
            ["error"],
            registry=r,
        )
        self._ready: dict[tuple[str, str, str], bool] = {}

    def observe(self, kind: str, namespace: str, name: str, ready: bool | None) -> None:
        """Record a resource's Ready state (None: the resource is gone)."""
        key = (kind, namespace, name)
        if ready is None:
            self._ready.pop(key, None)
        else:
            self._ready[key] = ready
        counts = {"True": 0, "False": 0}
        for (k, _, _), value in self._ready.items():
            if k == kind:
                counts["True" if value else "False"] += 1
        for state, count in counts.items():
            self.resources.labels(kind=kind, ready=state).set(count)

    def serve(self, port: int, addr: str = "0.0.0.0") -> int:
        """Serve /metrics on ``port`` (0 picks one), in a thread; returns the port bound."""
        server, _ = start_http_server(port, addr=addr, registry=self.registry)
        bound: int = server.server_port
        return bound
