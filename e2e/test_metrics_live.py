"""Every dashboard panel and alert rule, evaluated by a real Prometheus scraping real
dirigent processes through a workload that includes failures.

Given an embedded PostgreSQL, two `dirigent worker` processes, a scheduler and a Prometheus (Debian's)
on loopback scraping them every second, when runs that succeed and runs that fail have
settled, then every PromQL expression of every dashboard panel returns data, every alert
rule's expression evaluates, and every metric each references exists.

Two workers and a `dirigent scheduler` (firing a 1-second interval Schedule) run here; the
operator's, API's, webhook intake's and notifier's metrics and runs started come from
processes this test does not start yet. Their
expressions are strict xfails naming the missing process: once those processes are
started here and export their metrics, the xfail turns into a failure that asks for it
to be removed.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dirigent.engine import Engine, EngineSettings, RunRequest
from dirigent.engine.manifests.loading import parse_manifest, read_text
from dirigent.engine.store.database import create_database, upgrade_async
from dirigent.engine.store.embedded import EmbeddedPostgres
from e2e.harness.binaries import REPO_ROOT
from e2e.harness.processes import wait_until
from hack.ship import alerts, dashboards

pytestmark = pytest.mark.e2e

GOOD, BAD = 6, 4  # runs of examples/linear.yaml and of examples/error-handler.yaml
SUBSTITUTIONS = {"$__rate_interval": "1m", "$namespace": ".*", "$pipeline": ".*"}
SCHEDULE = """
apiVersion: dirigent.dev/v1alpha1
kind: Schedule
metadata: {name: every-second}
spec: {pipeline: linear, interval: 1s}
"""
# Metrics of processes this test runs (`dirigent worker`, `dirigent scheduler`).
RUNNING = {
    "dirigent_scheduler_firings_total",
    "dirigent_scheduler_misfires_total",
    "dirigent_scheduler_lag_seconds",
    "dirigent_attempts_total",
    "dirigent_attempt_duration_seconds",
    "dirigent_claim_latency_seconds",
    "dirigent_worker_in_flight",
    "dirigent_lease_recoveries_total",
    "dirigent_runs_finished_total",
    "dirigent_queue_depth",
    "dirigent_waiting_attempts",
}
OWNER = {  # the process that will export each other metric
    "dirigent_runs_started_total": "whatever creates runs (api / scheduler)",
    "dirigent_operator_": "dirigent operator",
    "dirigent_api_": "dirigent api",
    "dirigent_webhook_": "webhook intake in dirigent api",
    "dirigent_notifications_total": "the notifier in dirigent worker",
}


def _metrics(expr: str) -> set[str]:
    import re

    return {
        re.sub(r"_(bucket|sum|count)$", "", n) for n in re.findall(r"\b(dirigent_[a-z_]+)", expr)
    }


def _missing_owner(expr: str) -> str | None:
    absent = sorted(_metrics(expr) - RUNNING)
    if not absent:
        return None
    owners = {o for m in absent for prefix, o in OWNER.items() if m.startswith(prefix)}
    return f"{', '.join(absent)}: exported by {', '.join(sorted(owners))}, not started here"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _query(base: str, expr: str) -> dict[str, Any]:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as response:
        body: dict[str, Any] = json.load(response)
    return body


async def _prepare(url: str) -> None:
    await upgrade_async(url)
    async with Engine.open(EngineSettings(database_url=url), pool_size=2) as engine:
        texts = [
            (REPO_ROOT / "examples" / e).read_text() for e in ("linear.yaml", "error-handler.yaml")
        ]
        for text in [*texts, SCHEDULE]:
            docs, _ = read_text(text)
            manifest, problems = parse_manifest(docs[0].data)
            assert manifest is not None, problems
            await engine.apply(manifest, "default")


async def _start_runs(url: str, good: int, bad: int) -> None:
    async with Engine.open(EngineSettings(database_url=url), pool_size=2) as engine:
        requests = [RunRequest("default", "linear") for _ in range(good)]
        requests += [RunRequest("default", "error-handler") for _ in range(bad)]
        await engine.start_runs(requests)


def _wait_two_scrapes(api: str) -> None:
    """Until every worker target has been scraped twice more (rate() needs two samples)."""
    since = time.time()
    expr = 'min(timestamp(up{job="dirigent-worker"}))'

    def scraped_after(t: float) -> bool:
        result = _query(api, expr)["data"]["result"]
        return bool(result) and float(result[0]["value"][1]) > t

    wait_until(lambda: scraped_after(since), what="a scrape of every worker", timeout=30)
    again = time.time()
    wait_until(lambda: scraped_after(again), what="a second scrape", timeout=30)


def _rates_visible(api: str) -> bool:
    expr = "sum by (pipeline, state) (rate(dirigent_runs_finished_total[1m]))"
    try:
        result = _query(api, expr)["data"]["result"]
    except OSError:
        return False
    seen = {
        (r["metric"]["pipeline"], r["metric"]["state"]) for r in result if float(r["value"][1]) > 0
    }
    fired = _query(api, 'sum(rate(dirigent_scheduler_firings_total{result="fired"}[1m]))')
    firing = bool(fired["data"]["result"]) and float(fired["data"]["result"][0]["value"][1]) > 0
    return firing and {("linear", "succeeded"), ("error-handler", "failed")} <= seen


class Stack:
    def __init__(self, prometheus: str, worker_ports: list[int]) -> None:
        self.prometheus = prometheus
        self.worker_ports = worker_ports


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    binary = shutil.which("prometheus")
    assert binary, "prometheus is missing: apt-get install prometheus (.ci/run installs it)"
    base = Path(tempfile.mkdtemp(prefix="dirigent-metrics-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with EmbeddedPostgres(base / "pg") as pg:
            asyncio.run(create_database(pg.url, "metrics"))
            url = pg.url_for("metrics")
            asyncio.run(_prepare(url))
            ports = [_free_port(), _free_port()]
            for i, port in enumerate(ports):
                env = {
                    **os.environ,
                    "DIRIGENT_DATABASE_URL": url,
                    "DIRIGENT_METRICS_PORT": str(port),
                    "DIRIGENT_ARTIFACT_ROOT": str(base / f"artifacts{i}"),
                    "DIRIGENT_POLL_INTERVAL": "0.2",
                    "DIRIGENT_SWEEP_INTERVAL": "1",
                    "DIRIGENT_LOG_FORMAT": "json",
                }
                log = (base / f"worker{i}.log").open("wb")
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "dirigent.cli", "worker"],
                        env=env,
                        stdout=log,
                        stderr=log,
                    )
                )
            scheduler_port = _free_port()
            env = {
                **os.environ,
                "DIRIGENT_DATABASE_URL": url,
                "DIRIGENT_METRICS_PORT": str(scheduler_port),
                "DIRIGENT_LOG_FORMAT": "json",
            }
            log = (base / "scheduler.log").open("wb")
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "dirigent.cli", "scheduler"],
                    env=env,
                    stdout=log,
                    stderr=log,
                )
            )
            prom_port = _free_port()
            config = {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "scrape_configs": [
                    {
                        "job_name": "dirigent-scheduler",
                        "static_configs": [{"targets": [f"127.0.0.1:{scheduler_port}"]}],
                    },
                    {
                        "job_name": "dirigent-worker",
                        "static_configs": [{"targets": [f"127.0.0.1:{p}" for p in ports]}],
                    },
                ],
            }
            (base / "prometheus.yml").write_text(yaml.safe_dump(config))
            plog = (base / "prometheus.log").open("wb")
            procs.append(
                subprocess.Popen(
                    [
                        binary,
                        f"--config.file={base / 'prometheus.yml'}",
                        f"--storage.tsdb.path={base / 'tsdb'}",
                        f"--web.listen-address=127.0.0.1:{prom_port}",
                    ],
                    stdout=plog,
                    stderr=plog,
                )
            )
            api = f"http://127.0.0.1:{prom_port}"

            def finished(n: int) -> bool:
                try:
                    result = _query(api, "sum(dirigent_runs_finished_total)")["data"]["result"]
                except OSError:
                    return False
                return bool(result) and float(result[0]["value"][1]) >= n

            def both_up() -> bool:
                try:
                    result = _query(api, 'sum(up{job="dirigent-worker"})')["data"]["result"]
                except OSError:
                    return False
                return bool(result) and float(result[0]["value"][1]) == len(ports)

            wait_until(both_up, what="Prometheus scraping both workers", timeout=60)
            # Waves until the rates see both outcomes. A labelled counter is born on the
            # worker that first settles such a run, and its first value is invisible to
            # rate(); each worker's series count separately. So runs keep coming, a wave
            # at a time, until each pipeline's finished-runs rate is non-zero.
            done = 0
            deadline = time.monotonic() + 180
            while not _rates_visible(api):
                assert time.monotonic() < deadline, "rates never saw both pipelines' runs"
                asyncio.run(_start_runs(url, GOOD // 2, BAD // 2))
                done += GOOD // 2 + BAD // 2
                wait_until(lambda n=done: finished(n), what=f"{done} runs scraped", timeout=120)
                _wait_two_scrapes(api)
            yield Stack(api, ports)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(base, ignore_errors=True)


def _cases(items: list[tuple[str, str]]) -> list[Any]:
    out = []
    for where, expr in items:
        reason = _missing_owner(expr)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        out.append(pytest.param(expr, id=where, marks=marks))
    return out


PANELS = [(f"{uid}:{title}", expr) for uid, title, expr in dashboards.expressions()]
RULES = alerts.expressions()


@pytest.mark.parametrize("expr", _cases(PANELS))
def test_every_panel_returns_data(stack: Stack, expr: str) -> None:
    for var, value in SUBSTITUTIONS.items():
        expr = expr.replace(var, value)
    body = _query(stack.prometheus, expr)
    assert body["status"] == "success", body
    assert body["data"]["result"], f"no data for {expr}"


@pytest.mark.parametrize("expr", _cases(RULES))
def test_every_rule_evaluates_over_metrics_that_exist(stack: Stack, expr: str) -> None:
    body = _query(stack.prometheus, expr)
    assert body["status"] == "success", body
    for metric in sorted(_metrics(expr)):
        selector = f'{{__name__=~"{metric}(_bucket|_count)?"}}'
        assert _query(stack.prometheus, f"count({selector})")["data"]["result"], (
            f"{metric} has no series"
        )


def test_the_failing_runs_raise_the_failure_ratio(stack: Stack) -> None:
    rule = next(a for a in alerts.ALERTS if a.name == "DirigentRunsFailing")
    ratio_expr = rule.expr.rsplit(">", 1)[0]  # the ratio, without the threshold
    result = _query(stack.prometheus, ratio_expr)["data"]["result"]
    ratios = {r["metric"]["pipeline"]: float(r["value"][1]) for r in result}
    assert ratios.get("error-handler") == 1.0, ratios
    assert "linear" not in ratios, ratios  # it never failed: no failed series, no ratio


def test_no_live_worker_stays_quiet_while_workers_run(stack: Stack) -> None:
    expr = next(a.expr for a in alerts.ALERTS if a.name == "DirigentNoLiveWorker")
    assert _query(stack.prometheus, expr)["data"]["result"] == []
    workers = _query(stack.prometheus, "count(dirigent_worker_in_flight)")["data"]["result"]
    assert float(workers[0]["value"][1]) == len(stack.worker_ports)
