"""A worker process serves Prometheus metrics on its own port, and they count what happened."""

from __future__ import annotations

import subprocess
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.support.harness import Harness, spawn_worker
from tests.support.servers import free_port
from tests.support.waiting import eventually


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_a_worker_process_counts_attempts_runs_and_latency(
    h: Harness, db_url: str, tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    await h.apply("""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: metered}
spec:
  steps:
    ok: {block: core.noop, forEach: [1, 2, 3]}
    bad: {block: core.fail, dependsOn: [ok], config: {errorClass: rejected}}
""")
    port = free_port()
    processes.append(
        spawn_worker(
            db_url,
            tmp_path,
            extra={"DIRIGENT_METRICS_PORT": str(port), "DIRIGENT_SWEEP_INTERVAL": "0.2"},
        )
    )
    run = await h.run("metered")
    assert await h.until_finished(run.run_id, timeout=60) == "failed"
    finished = (
        "dirigent_runs_finished_total",
        (("namespace", "default"), ("pipeline", "metered"), ("state", "failed")),
    )

    async def scraped() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        try:
            return scrape(port)
        except OSError:  # not serving yet
            return {}

    metrics = await eventually(
        scraped, lambda m: bool(m.get(finished)), timeout=10, every=0.1, what="runs_finished"
    )
    assert (
        metrics[("dirigent_attempts_total", (("block", "core.noop"), ("outcome", "succeeded")))]
        == 3
    )
    assert (
        metrics[("dirigent_attempts_total", (("block", "core.fail"), ("outcome", "failed")))] == 1
    )
    assert metrics[("dirigent_claim_latency_seconds_count", ())] == 4
    assert metrics[("dirigent_attempt_duration_seconds_count", (("block", "core.noop"),))] == 3
    assert metrics[("dirigent_worker_in_flight", ())] == 0
    assert ("dirigent_queue_depth", ()) in metrics and ("dirigent_waiting_attempts", ()) in metrics
