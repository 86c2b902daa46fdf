"""Benchmark: how fast the real node turns a Job into a running container, bare and as a step.

Why: docker.run steps pay this latency on every attempt, and the real node's warm start is
what every e2e session pays; the figures belong in notes, not in timed test assertions.

    uv run python -m e2e.bench_real_node [--jobs 20]

Starts the local control plane and the real node (reporting how long each took), then runs
``--jobs`` Jobs one after another on the real node, twice:

* **bare**: a client creates the Job itself. "created" is our clock just before the create
  call; "complete" is when a client polling every 20 ms first saw the Job's Complete
  condition.
* **engine**: the same container as a one-step ``docker.run`` pipeline on an embedded
  PostgreSQL, run by one real ``dirigent worker`` process (probe interval ``--poll``).
  "created" is our clock just before ``Engine.start_run`` (so claiming the attempt and
  creating the Job are inside the figure); "finished" is the attempt's ``finished_at``
  (PostgreSQL's clock, the same host clock), and "seen" when the run's status, polled every
  20 ms through the engine's door, was terminal.

Each container's first act is to print ``time.time()``, so "started" is the moment the
Python process ran (interpreter start included), on the same clock as "created".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.workers import apply, door, stop_workers
from dirigent.engine import EmbeddedPostgres, RunRequest
from dirigent.engine.shapes.statuses import RUN_TERMINAL
from e2e.harness.binaries import ensure_binaries
from e2e.harness.controlplane import ControlPlane
from e2e.harness.images import BASE_IMAGE
from e2e.harness.realnode import RealNode, placement
from tests.support.postgres import migrated_database
from tests.support.waiting import eventually, wait_until

NAMESPACE = "bench-real-node"
ENGINE_NAMESPACE = "bench-real-node-engine"
PRINT_TIME = "import time; print(repr(time.time()))"


def _job(name: str) -> dict[str, Any]:
    spec = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": BASE_IMAGE,
                "imagePullPolicy": "Never",
                "command": ["python3", "-c", PRINT_TIME],
            }
        ],
        **placement(),
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"backoffLimit": 0, "template": {"spec": spec}},
    }


def _percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "p50": round(statistics.median(ordered), 3),
        "p95": round(p95, 3),
        "min": round(ordered[0], 3),
        "max": round(ordered[-1], 3),
    }


def _run_one(batch: Any, core: Any, name: str, deadline_s: float = 120) -> tuple[float, float]:
    """(created -> container started, created -> Complete seen) in seconds for one Job."""
    created = time.time()
    batch.create_namespaced_job(NAMESPACE, _job(name))

    def conditions() -> list[Any]:
        conds: list[Any] = batch.read_namespaced_job_status(name, NAMESPACE).status.conditions
        if any(c.type == "Failed" and c.status == "True" for c in conds or []):
            raise RuntimeError(f"job {name} failed: {conds}")
        return conds or []

    # Polled every 20 ms: the poll is the resolution of the latency measured.
    wait_until(
        conditions,
        lambda conds: any(c.type == "Complete" and c.status == "True" for c in conds),
        timeout=deadline_s,
        every=0.02,
        what=f"job {name} Complete",
    )
    done = time.time()
    pods = core.list_namespaced_pod(
        NAMESPACE, label_selector=f"batch.kubernetes.io/job-name={name}"
    )
    started = float(core.read_namespaced_pod_log(pods.items[0].metadata.name, NAMESPACE).strip())
    return started - created, done - created


def _measure(kubeconfig: Path, jobs: int) -> dict[str, Any]:
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    try:
        core: Any = client.CoreV1Api(api)
        batch: Any = client.BatchV1Api(api)
        core.create_namespace({"metadata": {"name": NAMESPACE}})
        wait_until(
            lambda: core.list_namespaced_service_account(NAMESPACE).items,
            timeout=60,
            every=0.1,
            what=f"the default service account of {NAMESPACE}",
        )
        _run_one(batch, core, "warmup")
        starts, dones = [], []
        for i in range(jobs):
            start, done = _run_one(batch, core, f"job-{i}")
            starts.append(start)
            dones.append(done)
        return {
            "jobs": jobs,
            "created_to_container_started_s": _percentiles(starts),
            "created_to_complete_seen_s": _percentiles(dones),
        }
    finally:
        api.close()


PIPELINE = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: stamp}}
spec:
  steps:
    job: {{block: docker.run, poll: {poll}, config: {config}}}
"""


def _worker(url: str, kubeconfig: Path, root: Path) -> subprocess.Popen[bytes]:
    """One real ``dirigent worker`` whose Jobs land on the real node."""
    env = {
        **os.environ,
        "DIRIGENT_DATABASE_URL": url,
        "DIRIGENT_ARTIFACT_ROOT": str(root / "artifacts"),
        "DIRIGENT_METRICS_PORT": "0",
        "DIRIGENT_ENABLED_UNSAFE_BLOCKS": "docker.run",
        "DIRIGENT_KUBE_KUBECONFIG": str(kubeconfig),
        "DIRIGENT_KUBE_POD_DEFAULTS": json.dumps(placement()),
    }
    with (root / "worker.log").open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "dirigent.cli", "worker"], env=env, stdout=out, stderr=out
        )


async def _one_step(engine: Any) -> tuple[float, float, float]:
    """(created -> container started, -> attempt finished, -> finish seen) for one run."""
    created = time.time()
    run = await engine.runs.start(RunRequest("default", "stamp"))
    detail = await eventually(
        lambda: engine.runs.get("default", run.run_id),
        lambda d: d.status in RUN_TERMINAL,
        timeout=120,
        every=0.02,  # the resolution of the latency measured
        what=f"run {run.run_id} finished",
    )
    seen = time.time()
    [attempt] = (await engine.runs.attempts("default", run.run_id, "job")).items
    assert detail.status == "succeeded", attempt
    started = float(attempt.output["log_tail"].strip())
    finished = attempt.finished_at.timestamp()
    return started - created, finished - created, seen - created


async def _measure_engine(kubeconfig: Path, jobs: int, poll: str, root: Path) -> dict[str, Any]:
    server = EmbeddedPostgres(root / "pgdata")
    server.start()
    worker: subprocess.Popen[bytes] | None = None
    try:
        url = await migrated_database(server, "bench")
        config = {"image": BASE_IMAGE, "imagePullPolicy": "Never", "namespace": ENGINE_NAMESPACE,
                  "command": ["python3", "-c", PRINT_TIME]}  # fmt: skip
        async with door(url, enabled_unsafe_blocks=["docker.run"]) as engine:
            await apply(engine, PIPELINE.format(poll=poll, config=json.dumps(config)))
            worker = _worker(url, kubeconfig, root)
            await _one_step(engine)  # warm-up: the worker registers and builds its API client
            rows = [await _one_step(engine) for _ in range(jobs)]
        return {
            "jobs": jobs,
            "probe_interval": poll,
            "created_to_container_started_s": _percentiles([r[0] for r in rows]),
            "created_to_step_finished_s": _percentiles([r[1] for r in rows]),
            "created_to_finished_seen_s": _percentiles([r[2] for r in rows]),
        }
    finally:
        if worker is not None:
            stop_workers([worker])
        server.stop()


def _namespace(kubeconfig: Path, name: str) -> None:
    subprocess.run(
        ["kubectl", f"--kubeconfig={kubeconfig}", "create", "namespace", name],
        check=True,
        capture_output=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.bench_real_node", description=__doc__)
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--poll", default="200ms", help="docker.run's probe interval")
    args = parser.parse_args(argv)
    began = time.monotonic()
    bin_dir = ensure_binaries()
    result: dict[str, Any] = {"binaries_s": round(time.monotonic() - began, 1)}
    with tempfile.TemporaryDirectory(prefix="bench-real-node-") as tmp:
        began = time.monotonic()
        with ControlPlane(bin_dir=bin_dir, workdir=Path(tmp), nodes=1) as plane:
            result["control_plane_start_s"] = round(time.monotonic() - began, 1)
            began = time.monotonic()
            with RealNode(bin_dir, plane.kubeconfig, plane.pki_dir) as node:
                result["real_node_start_s"] = round(time.monotonic() - began, 1)
                result["real_node_steps_s"] = node.timings
                result["bare"] = _measure(plane.kubeconfig, args.jobs)
                _namespace(plane.kubeconfig, ENGINE_NAMESPACE)
                result["engine"] = asyncio.run(
                    _measure_engine(plane.kubeconfig, args.jobs, args.poll, Path(tmp))
                )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
