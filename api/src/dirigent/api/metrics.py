"""API metrics: requests by route template, method and status; durations by route.

Labelled by the route *template* (``/api/v1/namespaces/{namespace}/runs/{run_id}``), never
the concrete path, so a million runs are still one series. The registry is the app's own
and is served on its own port (``DIRIGENT_METRICS_PORT``), not by the API.
"""

from __future__ import annotations

import time
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60, 600)


class ApiMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.requests = Counter(
            "dirigent_api_requests",
            "API requests answered, by route template, method and status.",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "dirigent_api_request_duration_seconds",
            "From a request arriving to its response finishing (a stream: its whole life).",
            ["route", "method"],
            buckets=_BUCKETS,
            registry=self.registry,
        )

    def serve(self, port: int, addr: str = "0.0.0.0") -> WSGIServer:
        """Serve /metrics on its own port, in a background thread; ``shutdown()`` stops it."""
        server, _ = start_http_server(port, addr=addr, registry=self.registry)
        return server


class MetricsMiddleware:
    """Pure ASGI, so streaming responses pass through untouched."""

    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def record(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, record)
        finally:
            route = route_template(scope)
            method = scope["method"]
            self.metrics.requests.labels(route, method, str(status)).inc()
            self.metrics.duration.labels(route, method).observe(time.perf_counter() - started)


def route_template(scope: Scope) -> str:
    """The matched route's full path template; "unmatched" for a 404 or 405 of routing.

    The router puts the chosen route in the scope, but an included route knows only its path
    relative to its router; the OpenAPI document knows every operation's full path by its
    (explicit, unique) operationId.
    """
    route = scope.get("route")
    if route is None:
        return "unmatched"
    operation = getattr(route, "operation_id", None)
    app = scope.get("app")
    if operation and app is not None:
        full = _operation_paths(app).get(operation)
        if full:
            return full
    return str(getattr(route, "path", "unmatched"))


def _operation_paths(app: Any) -> dict[str, str]:
    found: dict[str, str] | None = getattr(app.state, "operation_paths", None)
    if found is None:
        found = {
            operation["operationId"]: path
            for path, methods in app.openapi().get("paths", {}).items()
            for operation in methods.values()
            if "operationId" in operation
        }
        app.state.operation_paths = found
    return found
