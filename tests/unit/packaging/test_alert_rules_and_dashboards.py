"""Alert rules and dashboard queries are valid PromQL over the agreed metric names only.

``promtool`` (Debian's prometheus package) checks the rules file and runs its unit tests
(hack/ship/alerts_test.yaml: each alert fires on the series meant to raise it, with its
labels and rendered annotations, and stays quiet on a healthy neighbour); every dashboard
query is parsed by promtool as a recording rule. Whether each query returns data from real
processes is the e2e test's job.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from hack.ship import alerts, dashboards

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "charts" / "dirigent" / "files" / "alerts.yaml"

# HELPERS.md, "Agreed Prometheus metric names" (counters with _total, histograms with
# _bucket / _sum / _count).
AGREED = {
    "dirigent_attempts_total",
    "dirigent_attempt_duration_seconds",
    "dirigent_claim_latency_seconds",
    "dirigent_worker_in_flight",
    "dirigent_lease_recoveries_total",
    "dirigent_runs_finished_total",
    "dirigent_queue_depth",
    "dirigent_waiting_attempts",
    "dirigent_runs_started_total",
    "dirigent_operator_reconciles_total",
    "dirigent_operator_reconcile_duration_seconds",
    "dirigent_operator_resources",
    "dirigent_api_requests_total",
    "dirigent_api_request_duration_seconds",
    "dirigent_scheduler_firings_total",
    "dirigent_scheduler_misfires_total",
    "dirigent_scheduler_lag_seconds",
    "dirigent_webhook_deliveries_total",
    "dirigent_webhook_refusals_total",
    "dirigent_notifications_total",
}
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$namespace": ".*", "$pipeline": ".*"}


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    assert binary, "promtool is missing: apt-get install prometheus (.ci/run installs it)"
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=60, check=False)


def metric_names(expr: str) -> set[str]:
    names = set(re.findall(r"\b(dirigent_[a-z_]+)", expr))
    return {re.sub(r"_(bucket|sum|count)$", "", n) for n in names}


def test_promtool_accepts_the_rules_file() -> None:
    result = promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alerts.ALERTS)} rules found" in result.stdout


def test_promtool_unit_tests_of_the_alerts_pass() -> None:
    result = promtool("test", "rules", str(ROOT / "hack" / "ship" / "alerts_test.yaml"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_promtool_test_that_fires_it() -> None:
    tests = yaml.safe_load((ROOT / "hack" / "ship" / "alerts_test.yaml").read_text())["tests"]
    fired = {
        case["alertname"]
        for group in tests
        for case in group["alert_rule_test"]
        if case.get("exp_alerts")
    }
    assert fired == {a.name for a in alerts.ALERTS}


def test_every_alert_has_a_runbook_section() -> None:
    operate = (ROOT / "docs" / "operate.md").read_text()
    for alert in alerts.ALERTS:
        assert f"### {alert.name}" in operate, f"docs/operate.md has no section for {alert.name}"


def test_every_dashboard_query_parses(tmp_path: Path) -> None:
    rules = []
    for i, (_uid, _title, expr) in enumerate(dashboards.expressions()):
        for var, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(var, value)
        rules.append({"record": f"dashboard:query_{i}", "expr": expr})
    path = tmp_path / "dashboards.rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    result = promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("where", "expr"),
    [(f"alert {n}", e) for n, e in alerts.expressions()]
    + [(f"{u} / {t}", e) for u, t, e in dashboards.expressions()],
)
def test_only_agreed_metric_names_are_referenced(where: str, expr: str) -> None:
    names = metric_names(expr)
    assert names, f"{where} references no dirigent metric"
    assert names <= AGREED, f"{where} references unknown metrics {sorted(names - AGREED)}"


def test_the_three_dashboards_cover_the_issue() -> None:
    titles = {d.uid: [p.title for p in d.panels] for d in dashboards.DASHBOARDS}
    assert set(titles) == {"dirigent-overview", "dirigent-pipeline", "dirigent-operations"}
    covered = {m for _, _, e in dashboards.expressions() for m in metric_names(e)}
    assert covered == AGREED, f"metrics on no dashboard: {sorted(AGREED - covered)}"
