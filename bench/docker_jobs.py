"""docker.run: Jobs created per second through the engine vs a bare client at the same QPS.

Issue 11's measurement. Both sides go through the same rate-limited client
(``dirigent.blocks.kubernetes.client.KubeClient``) at ``--qps``/``--burst``, so the bound is
the same and the difference is the engine's overhead per Job step: claim, resolve, execute,
park, and (while the Jobs exist) the probes, which spend tokens of the same budget.

* **bare**: ``--runs`` Job manifests (as docker.run builds them) created by ``asyncio.gather``
  through one ``KubeClient``; time from the first request to the last answer.
* **engine**: ``--runs`` one-step docker.run runs created at once on an embedded
  PostgreSQL, executed by one ``dirigent worker`` subprocess (concurrency ``--concurrency``,
  ``DIRIGENT_KUBE_QPS``/``BURST`` as above); time from creating the runs to the moment the
  last Job exists (the Jobs' own ``creationTimestamp``s, read from the API server, so the
  bench's polling does not enter the figure; second resolution, so the first-to-last span is
  taken from the API's timestamps and the start from our clock when the runs committed;
  creating the runs is reported on its own line).

The cluster comes from ``--kubeconfig`` (default ``$KUBECONFIG``); ``make cluster-up`` gives
the local control plane (kwok plays the pods).

    export KUBECONFIG=$(make -s cluster-up)
    uv run python bench/docker_jobs.py --runs 200 --qps 20

Last line: runs=<n> qps=<q> bare_jobs_per_s=<a> engine_jobs_per_s=<b> overhead_pct=<c>
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from workers import apply, door, stop_workers, wait_registered

from dirigent.blocks.kubernetes.client import KubeClient
from dirigent.blocks.kubernetes.connection import ClusterAccess
from dirigent.engine import RunRequest
from dirigent.engine.infrastructure.embedded import EmbeddedPostgres
from dirigent.engine.store.pool import create_pool
from dirigent.engine.store.schema.database import create_database, upgrade_async


def job(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 3600,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "containers": [{"name": "main", "image": "busybox:1.36", "command": ["true"]}],
                }
            },
        },
    }


def kubectl(kubeconfig: str, *args: str) -> str:
    return subprocess.run(
        ["kubectl", f"--kubeconfig={kubeconfig}", *args], check=True, capture_output=True, text=True
    ).stdout


async def job_stamps(kubeconfig: str, namespace: str, count: int) -> list[dt.datetime]:
    """The creationTimestamps of docker.run's Jobs, once there are ``count`` of them."""
    while True:
        found = await asyncio.to_thread(
            kubectl,
            kubeconfig,
            "get",
            "jobs",
            "-n",
            namespace,
            "-l",
            "app.kubernetes.io/managed-by=dirigent",
            "-o",
            "jsonpath={range .items[*]}{.metadata.creationTimestamp}{'\\n'}{end}",
        )
        stamps = [s for s in found.split() if s]
        if len(stamps) >= count:
            return sorted(dt.datetime.fromisoformat(s.replace("Z", "+00:00")) for s in stamps)
        await asyncio.sleep(0.5)


def spawn(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "dirigent.cli", "worker"], env=env, stdout=out, stderr=out
        )


def _worker_env(args: argparse.Namespace, url: str, base: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DIRIGENT_DATABASE_URL": url,
        "DIRIGENT_WORKER_CONCURRENCY": str(args.concurrency),
        "DIRIGENT_ARTIFACT_ROOT": str(base / "art"),
        "DIRIGENT_METRICS_PORT": "0",
        "DIRIGENT_ENABLED_UNSAFE_BLOCKS": "docker.run",
        "DIRIGENT_KUBE_KUBECONFIG": args.kubeconfig,
        "DIRIGENT_KUBE_QPS": str(args.qps),
        "DIRIGENT_KUBE_BURST": str(args.burst),
        "DIRIGENT_LOG_FORMAT": "json",
        "DIRIGENT_KUBE_PLACEMENT": os.environ["DIRIGENT_KUBE_PLACEMENT"],
    }


async def bare(kube: KubeClient, namespace: str, n: int) -> float:
    started = time.monotonic()
    await asyncio.gather(
        *(kube.create_job(namespace, job(namespace, f"bare-{i}")) for i in range(n))
    )
    return time.monotonic() - started


async def engine(args: argparse.Namespace, namespace: str) -> float:
    # The installation lets the bench's pipeline (namespace "default") run Jobs there, here
    # (apply) and in the worker. `network: true`: no NetworkPolicy beside each Job, so both
    # sides make one API request per Job, as the comparison needs.
    os.environ["DIRIGENT_KUBE_PLACEMENT"] = json.dumps({"default": {"namespaces": [namespace]}})
    base = Path(tempfile.mkdtemp(prefix="dirigent-bench-jobs-"))
    server = EmbeddedPostgres(base / "pgdata")
    server.start()
    try:
        await create_database(server.url, "jobs")
        url = server.url_for("jobs")
        await upgrade_async(url)
        pool = await create_pool(url, max_size=2)
        async with door(url, enabled_unsafe_blocks=["docker.run"]) as engine:
            await apply(
                engine,
                f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: job}}
spec:
  steps:
    job: {{block: docker.run, poll: {args.poll}, config: {{image: 'busybox:1.36', command: ['true'], namespace: {namespace}, network: true}}}}
""",
            )
            procs = [spawn(_worker_env(args, url, base), Path(args.worker_log))]
            await wait_registered(pool, 1)
            request = RunRequest("default", "job")
            # Warm-up: one run, so the worker has built its API client (here that means
            # compiling the kubernetes package's 4 MB modules: the environment sets
            # PYTHONDONTWRITEBYTECODE) before the clock starts. A long-lived worker pays this
            # once, not per Job.
            await engine.runs.start(request)
            await job_stamps(args.kubeconfig, namespace, 1)
            started = time.monotonic()
            await engine.runs.start_many([request] * args.runs)
            created_at = time.monotonic() - started
            # The clock starts when the runs are committed: from then on every second is the
            # engine's (claim, execute, create the Job, park) and the API server's.
            committed_wall = dt.datetime.now(dt.UTC)
            times = (await job_stamps(args.kubeconfig, namespace, args.runs + 1))[1:]
        first, last = times[0], times[-1]
        stop_workers(procs)
        await pool.close()
        print(f"engine: {args.runs} runs created in {created_at:.2f}s (one transaction)")
        print(
            f"engine: first Job to last Job {(last - first).total_seconds():.0f}s (1 s resolution)"
        )
        # creationTimestamp has second resolution: add the half second it may hide.
        return (last - committed_wall).total_seconds() + 0.5
    finally:
        server.stop()


async def main(args: argparse.Namespace) -> None:
    suffix = uuid.uuid4().hex[:6]
    ns_bare, ns_engine = f"bench-bare-{suffix}", f"bench-engine-{suffix}"
    for ns in (ns_bare, ns_engine):
        kubectl(args.kubeconfig, "create", "namespace", ns)
    config = ClusterAccess(kubeconfigPath=args.kubeconfig, qps=args.qps, burst=args.burst)
    try:
        async with KubeClient.connect(config) as kube:
            t_bare = await bare(kube, ns_bare, args.runs)
        t_engine = await engine(args, ns_engine)
    finally:
        for ns in (ns_bare, ns_engine):
            kubectl(args.kubeconfig, "delete", "namespace", ns, "--wait=false")
    rate_bare, rate_engine = args.runs / t_bare, args.runs / t_engine
    overhead = (t_engine - t_bare) / t_bare * 100
    print(f"bare client: {args.runs} Jobs in {t_bare:.2f}s ({rate_bare:.1f}/s)")
    print(f"engine:      {args.runs} Jobs in {t_engine:.2f}s ({rate_engine:.1f}/s)")
    print(
        f"runs={args.runs} qps={args.qps} bare_jobs_per_s={rate_bare:.1f} "
        f"engine_jobs_per_s={rate_engine:.1f} overhead_pct={overhead:.1f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG", ""))
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--qps", type=float, default=20.0)
    parser.add_argument("--burst", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--worker-log", default="/dev/null", help="the worker's output")
    parser.add_argument("--poll", default="30s", help="docker.run probe interval in the bench")
    asyncio.run(main(parser.parse_args()))
