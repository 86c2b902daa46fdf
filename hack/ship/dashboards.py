"""Grafana dashboards as code: overview, pipeline drill-down, operations.

Why code: a panel is a title, a PromQL expression and a unit; the JSON around it is
boilerplate that drifts when written by hand. Every expression here names only the agreed
metrics (HELPERS.md / docs/operate.md), and ``expressions()`` hands them to the test that
evaluates each one against a Prometheus scraping real dirigent processes.

Conventions: ``$datasource`` picks the Prometheus; ``$namespace`` / ``$pipeline`` are
regex-matched multi-selects; rates use ``$__rate_interval``. Queue depth and waiting count
are database-wide numbers every worker's sweeper samples, so they are read with ``max``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DASHBOARDS", "Dashboard", "Panel", "render"]


@dataclass(frozen=True)
class Panel:
    title: str
    exprs: dict[str, str]  # legend format -> PromQL
    unit: str = "short"
    kind: str = "timeseries"
    description: str = ""
    width: int = 12


@dataclass(frozen=True)
class Dashboard:
    uid: str
    title: str
    description: str
    panels: list[Panel]
    variables: list[str] = field(default_factory=list)  # label names: namespace, pipeline


def _q(quantile: float, metric: str, by: str = "", where: str = "") -> str:
    group = f"le{', ' + by if by else ''}"
    return (
        f"histogram_quantile({quantile}, sum by ({group}) "
        f"(rate({metric}_bucket{where}[$__rate_interval])))"
    )


_SEL = '{namespace=~"$namespace"}'
_PSEL = '{namespace=~"$namespace", pipeline=~"$pipeline"}'

OVERVIEW = Dashboard(
    uid="dirigent-overview",
    title="dirigent / Overview",
    description="Runs, attempts, claim latency, backlog and workers across every pipeline.",
    variables=["namespace"],
    panels=[
        Panel(
            "Runs finished by state",
            {
                "{{state}}": f"sum by (state) (rate(dirigent_runs_finished_total{_SEL}[$__rate_interval]))"
            },
            unit="ops",
        ),
        Panel(
            "Runs started by trigger",
            {
                "{{trigger}}": f"sum by (trigger) (rate(dirigent_runs_started_total{_SEL}[$__rate_interval]))"
            },
            unit="ops",
        ),
        Panel(
            "Failed runs by pipeline (1h)",
            {
                "{{namespace}}/{{pipeline}}": "topk(10, sum by (namespace, pipeline) "
                '(increase(dirigent_runs_finished_total{namespace=~"$namespace", state="failed"}[1h])))'
            },
        ),
        Panel(
            "Attempt throughput by outcome",
            {"{{outcome}}": "sum by (outcome) (rate(dirigent_attempts_total[$__rate_interval]))"},
            unit="ops",
        ),
        Panel(
            "Claim latency (due to claimed)",
            {
                "p50": _q(0.5, "dirigent_claim_latency_seconds"),
                "p95": _q(0.95, "dirigent_claim_latency_seconds"),
            },
            unit="s",
        ),
        Panel(
            "Queue depth and waiting attempts",
            {
                "queued (due now)": "max(dirigent_queue_depth)",
                "waiting": "max(dirigent_waiting_attempts)",
            },
            description="Sampled by the sweeper; one database-wide number, hence max.",
        ),
        Panel(
            "Worker in-flight attempts",
            {"{{instance}}": "sum by (instance) (dirigent_worker_in_flight)"},
        ),
        Panel(
            "Live workers",
            {"workers": "count(dirigent_worker_in_flight)"},
            kind="stat",
        ),
    ],
)

PIPELINE = Dashboard(
    uid="dirigent-pipeline",
    title="dirigent / Pipeline",
    description="One pipeline (or a few): runs started and finished, failure ratio, blocks.",
    variables=["namespace", "pipeline"],
    panels=[
        Panel(
            "Runs started by trigger",
            {
                "{{pipeline}} {{trigger}}": "sum by (pipeline, trigger) "
                f"(rate(dirigent_runs_started_total{_PSEL}[$__rate_interval]))"
            },
            unit="ops",
        ),
        Panel(
            "Runs finished by state",
            {
                "{{pipeline}} {{state}}": "sum by (pipeline, state) "
                f"(rate(dirigent_runs_finished_total{_PSEL}[$__rate_interval]))"
            },
            unit="ops",
        ),
        Panel(
            "Failure ratio",
            {
                "{{pipeline}}": "sum by (pipeline) (rate(dirigent_runs_finished_total"
                '{namespace=~"$namespace", pipeline=~"$pipeline", state="failed"}[$__rate_interval]))'
                " / sum by (pipeline) (rate(dirigent_runs_finished_total"
                f"{_PSEL}[$__rate_interval]))"
            },
            unit="percentunit",
        ),
        Panel(
            "Runs finished (24h)",
            {"{{state}}": f"sum by (state) (increase(dirigent_runs_finished_total{_PSEL}[24h]))"},
            kind="stat",
        ),
        Panel(
            "Attempt duration p95 by block",
            {"{{block}}": _q(0.95, "dirigent_attempt_duration_seconds", by="block")},
            unit="s",
            description="Attempts are labelled by block, not by pipeline: all pipelines.",
        ),
        Panel(
            "Attempts by block and outcome",
            {
                "{{block}} {{outcome}}": "sum by (block, outcome) "
                "(rate(dirigent_attempts_total[$__rate_interval]))"
            },
            unit="ops",
        ),
    ],
)

OPERATIONS = Dashboard(
    uid="dirigent-operations",
    title="dirigent / Operations",
    description="Scheduler, webhook intake, notifications, operator, leases and the API.",
    panels=[
        Panel(
            "Scheduler lag (due to fired)",
            {
                "p50": _q(0.5, "dirigent_scheduler_lag_seconds"),
                "p95": _q(0.95, "dirigent_scheduler_lag_seconds"),
            },
            unit="s",
        ),
        Panel(
            "Scheduler firings and misfires",
            {
                "{{result}}": "sum by (result) (rate(dirigent_scheduler_firings_total[$__rate_interval]))",
                "misfires": "sum(rate(dirigent_scheduler_misfires_total[$__rate_interval]))",
            },
            unit="ops",
        ),
        Panel(
            "Webhook deliveries",
            {
                "{{result}}": "sum by (result) (rate(dirigent_webhook_deliveries_total[$__rate_interval]))"
            },
            unit="ops",
        ),
        Panel(
            "Webhook refusals by reason",
            {
                "{{reason}}": "sum by (reason) (rate(dirigent_webhook_refusals_total[$__rate_interval]))"
            },
            unit="ops",
        ),
        Panel(
            "Notifications by outcome",
            {
                "{{outcome}}": "sum by (outcome) (rate(dirigent_notifications_total[$__rate_interval]))"
            },
            unit="ops",
        ),
        Panel(
            "Lease recoveries",
            {"recovered": "sum(increase(dirigent_lease_recoveries_total[$__rate_interval]))"},
            description="Attempts whose worker stopped heartbeating; should stay near zero.",
        ),
        Panel(
            "Operator reconciles by kind and result",
            {
                "{{kind}} {{result}}": "sum by (kind, result) "
                "(rate(dirigent_operator_reconciles_total[$__rate_interval]))"
            },
            unit="ops",
        ),
        Panel(
            "Operator reconcile duration p95",
            {"{{kind}}": _q(0.95, "dirigent_operator_reconcile_duration_seconds", by="kind")},
            unit="s",
        ),
        Panel(
            "Resources by readiness",
            {"{{kind}} ready={{ready}}": "sum by (kind, ready) (dirigent_operator_resources)"},
        ),
        Panel(
            "API requests by status",
            {"{{status}}": "sum by (status) (rate(dirigent_api_requests_total[$__rate_interval]))"},
            unit="reqps",
        ),
        Panel(
            "API latency p95 by route",
            {
                "{{method}} {{route}}": _q(
                    0.95, "dirigent_api_request_duration_seconds", by="route, method"
                )
            },
            unit="s",
            width=24,
        ),
    ],
)

DASHBOARDS = [OVERVIEW, PIPELINE, OPERATIONS]


def _variable(label: str) -> dict[str, Any]:
    query = f"label_values(dirigent_runs_finished_total, {label})"
    return {
        "name": label,
        "label": label,
        "type": "query",
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "query": {"query": query, "refId": f"{label}-values"},
        "definition": query,
        "includeAll": True,
        "allValue": ".*",
        "multi": True,
        "refresh": 2,
        "sort": 1,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
    }


def _panel(panel: Panel, pid: int, x: int, y: int) -> dict[str, Any]:
    targets = [
        {
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "expr": expr,
            "legendFormat": legend,
            "refId": chr(ord("A") + i),
        }
        for i, (legend, expr) in enumerate(panel.exprs.items())
    ]
    return {
        "id": pid,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": panel.width, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
        "targets": targets,
    }


def render(dashboard: Dashboard) -> str:
    panels: list[dict[str, Any]] = []
    x = y = 0
    for pid, panel in enumerate(dashboard.panels, start=1):
        if x + panel.width > 24:
            x, y = 0, y + 8
        panels.append(_panel(panel, pid, x, y))
        x += panel.width
    datasource = {
        "name": "datasource",
        "label": "Prometheus",
        "type": "datasource",
        "query": "prometheus",
        "current": {},
    }
    doc = {
        "uid": dashboard.uid,
        "title": dashboard.title,
        "description": dashboard.description,
        "tags": ["dirigent"],
        "editable": True,
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "timezone": "",
        "templating": {"list": [datasource, *(_variable(v) for v in dashboard.variables)]},
        "annotations": {"list": []},
        "links": [],
        "panels": panels,
    }
    return json.dumps(doc, indent=2) + "\n"


def expressions() -> list[tuple[str, str, str]]:
    """(dashboard uid, panel title, PromQL) for every target of every dashboard."""
    return [(d.uid, p.title, e) for d in DASHBOARDS for p in d.panels for e in p.exprs.values()]
