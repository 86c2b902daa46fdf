"""The operator's own port, served from the first second: metrics, liveness and readiness.

A standby must answer its probes: it opens no Kubernetes watch and reconciles nothing, but
it is alive and ready to take over. Before, the port opened only once the Lease was held, so
under real probes the standby was killed by its liveness probe a minute after each start and
a rolling ``helm upgrade`` never finished.

- ``/healthz``: the process's event loop answers (liveness);
- ``/readyz``: 200 with ``{"role": "standby"}`` or ``{"role": "leader", ...}``; 503 while the
  leader's status feedback loop is down and restarting, so a stuck leader shows;
- ``/metrics``: the operator's registry (Prometheus text format).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from .metrics import OperatorMetrics

__all__ = ["Health", "serve_health"]


@dataclass
class Health:
    """What readiness reports; the leadership and the feedback supervisor keep it current."""

    leading: bool = False
    feedback_down: str | None = None  # why the feedback loop is restarting, while it is

    def ready(self) -> tuple[int, dict[str, object]]:
        if not self.leading:
            return 200, {"role": "standby"}
        if self.feedback_down is not None:
            return 503, {"role": "leader", "feedback": "restarting", "why": self.feedback_down}
        return 200, {"role": "leader", "feedback": "running"}


async def serve_health(
    health: Health, metrics: OperatorMetrics, port: int, host: str = "0.0.0.0"
) -> tuple[web.AppRunner, int]:
    """Start serving; returns the runner (``await runner.cleanup()`` stops it) and the port."""

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_: web.Request) -> web.Response:
        status, body = health.ready()
        return web.Response(status=status, text=json.dumps(body), content_type="application/json")

    async def metrics_text(_: web.Request) -> web.Response:
        metrics.leader.set(1 if health.leading else 0)
        return web.Response(
            body=generate_latest(metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_text)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = int(runner.addresses[0][1]) if runner.addresses else port
    return runner, bound
