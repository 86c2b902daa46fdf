"""Benchmark: how fast the real node turns a Job into a running container.

Why: docker.run steps pay this latency on every attempt, and the real node's warm start is
what every e2e session pays; the figures belong in notes, not in timed test assertions.

    uv run python -m e2e.bench_real_node [--jobs 20]

Starts the local control plane and the real node (reporting how long each took), then runs
``--jobs`` Jobs one after another on the real node. Each container's first act is to print
``time.time()``, so "started" is the moment the Python process ran (interpreter start
included), on the same clock as the client's "created" (just before the create call).
"Complete" is when a client polling every 20 ms first saw the Job's Complete condition.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from e2e.harness.binaries import ensure_binaries
from e2e.harness.controlplane import ControlPlane
from e2e.harness.images import BASE_IMAGE
from e2e.harness.realnode import RealNode, placement

NAMESPACE = "bench-real-node"


def _job(name: str) -> dict[str, Any]:
    spec = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": BASE_IMAGE,
                "imagePullPolicy": "Never",
                "command": ["python3", "-c", "import time; print(repr(time.time()))"],
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
    deadline = time.monotonic() + deadline_s
    while True:
        job = batch.read_namespaced_job_status(name, NAMESPACE)
        conds = job.status.conditions or []
        if any(c.type == "Complete" and c.status == "True" for c in conds):
            done = time.time()
            break
        if any(c.type == "Failed" and c.status == "True" for c in conds):
            raise RuntimeError(f"job {name} failed: {conds}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {name} not complete after {deadline_s}s")
        time.sleep(0.02)
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
        while not core.list_namespaced_service_account(NAMESPACE).items:
            time.sleep(0.1)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.bench_real_node", description=__doc__)
    parser.add_argument("--jobs", type=int, default=20)
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
                result.update(_measure(plane.kubeconfig, args.jobs))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
