"""docker.run on the real node: a dirigent step whose Job runs a real container.

Why: against kwok a docker.run Job "succeeds" or "fails" by annotation and no log exists;
here the engine and a worker run a pipeline whose docker.run step starts a Python process
in ``localhost/dirigent/base:bookworm`` under containerd, and its exit code, its log and
its end (OOM, cancel, deadline) come back through the block for real.

The worker places its Jobs on the real node the way a person running a worker would:
``DIRIGENT_KUBE_POD_DEFAULTS`` (node selector, toleration, host network); the pipelines
stay portable. The step's own ``timeout`` reaches the Job as its ``activeDeadlineSeconds``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from e2e.harness.clusters import Cluster
from e2e.harness.images import BASE_IMAGE
from e2e.harness.realnode import RealNode, placement
from e2e.kubectl import Kubectl
from tests.support.harness import Harness, harness
from tests.support.postgres import database_factory, db_url, make_database, pg_server, pg_template
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e
__all__ = ["database_factory", "db_url", "make_database", "pg_server", "pg_template"]

FAST = {"heartbeat": dt.timedelta(milliseconds=200), "enabled_unsafe": frozenset({"docker.run"})}


@pytest.fixture
async def h(
    real_node: RealNode,
    db_url: str,
    tmp_path: Path,
    cluster: Cluster,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Harness]:
    monkeypatch.setenv("DIRIGENT_KUBE_KUBECONFIG", str(cluster.kubeconfig))
    monkeypatch.setenv("DIRIGENT_KUBE_POD_DEFAULTS", json.dumps(placement()))
    # The harness's pipelines (namespace "default") may run Jobs in this test's namespace.
    monkeypatch.setenv(
        "DIRIGENT_KUBE_PLACEMENT", json.dumps({"default": {"namespaces": [namespace]}})
    )
    async with harness(db_url, tmp_path / "artifacts", unsafe=("docker.run",)) as found:
        yield found


def python_step(
    name: str, namespace: str, script: str, timeout: str | None = None, **config: Any
) -> str:
    body = {
        "image": BASE_IMAGE,
        "imagePullPolicy": "Never",
        "namespace": namespace,
        "command": ["python3", "-c", script],
        **config,
    }
    limit = f" timeout: {timeout}," if timeout else ""
    return f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: {name}}}
spec:
  steps:
    job: {{block: docker.run, poll: 200ms,{limit} config: {json.dumps(body)}}}
"""


def only_pod(kubectl: Kubectl, namespace: str, run_id: int) -> dict[str, Any]:
    pods = kubectl.json("get", "pods", "-n", namespace, "-l", f"dirigent.dev/run={run_id}")
    items: list[dict[str, Any]] = pods["items"]
    assert len(items) == 1, [p["metadata"]["name"] for p in items]
    return items[0]


def jobs(kubectl: Kubectl, namespace: str, run_id: int) -> list[dict[str, Any]]:
    found = kubectl.json("get", "jobs", "-n", namespace, "-l", f"dirigent.dev/run={run_id}")
    items: list[dict[str, Any]] = found["items"]
    return items


def printed(kubectl: Kubectl, namespace: str, run_id: int) -> bool:
    """The step's container has printed 'started' (so it really runs)."""
    pods = kubectl.json("get", "pods", "-n", namespace, "-l", f"dirigent.dev/run={run_id}")
    names = [p["metadata"]["name"] for p in pods["items"]]
    logs = kubectl.run("logs", "-n", namespace, names[0], check=False) if names else None
    return logs is not None and logs.stdout == "started\n"


async def until(check: Callable[[], object], what: str, timeout: float = 60.0) -> None:
    """``check`` (it runs kubectl: blocking, so in a thread) until it is true."""
    await eventually(lambda: asyncio.to_thread(check), what=what, timeout=timeout, every=0.1)


async def test_a_python_step_runs_in_a_real_container_and_its_log_is_the_output(
    h: Harness, kubectl: Kubectl, namespace: str, real_node: RealNode
) -> None:
    # 300 numbered lines: more than the 1 KiB tail kept in the output, all in the artifact.
    script = "import sys\nfor i in range(300): print(f'line {i:03d} sum', sum(range(i)))"
    await h.apply(python_step("hello", namespace, script, logTail=1024))
    run_id = (await h.run("hello")).run_id
    async with h.workers(1, **FAST):
        assert await h.until_finished(run_id, timeout=180) == "succeeded", await h.attempts(run_id)
    [attempt] = await h.attempts(run_id, "job")
    out = attempt["output"]
    whole = "".join(f"line {i:03d} sum {sum(range(i))}\n" for i in range(300))
    assert out["exit_code"] == 0
    assert (await h.storage.read_bytes(out["log_uri"])).decode() == whole
    assert out["log_tail"] == whole[-1024:] and out["log_tail"].endswith("line 299 sum 44551\n")
    pod = only_pod(kubectl, namespace, run_id)
    assert pod["spec"]["nodeName"] == real_node.node_name
    state = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert state["containerID"].startswith("containerd://")


async def test_exit_code_3_fails_the_step_with_the_code_and_the_last_lines(
    h: Harness, namespace: str
) -> None:
    script = "import sys\nfor i in range(20): print('step', i)\nprint('giving up', flush=True)\nsys.exit(3)"
    await h.apply(python_step("bad", namespace, script))
    run_id = (await h.run("bad")).run_id
    async with h.workers(1, **FAST):
        assert await h.until_finished(run_id, timeout=180) == "failed"
    [attempt] = await h.attempts(run_id, "job")
    message = attempt["error_message"]
    assert attempt["error_code"] == "engine.remote.failed", attempt
    assert "Error, exit code 3" in message, message
    last = message.split("last lines:\n", 1)[1].splitlines()
    assert last == [f"step {i}" for i in range(11, 20)] + ["giving up"], message


async def test_a_step_over_its_memory_limit_ends_oom_killed(h: Harness, namespace: str) -> None:
    script = (
        "blocks = []\n"
        "for i in range(32):\n"
        "    blocks.append(bytes([i % 251 + 1]) * (16 << 20))\n"
        "    print('held', (i + 1) * 16, 'MiB', flush=True)\n"
    )
    limits = {"limits": {"memory": "64Mi"}, "requests": {"memory": "64Mi"}}
    await h.apply(python_step("hog", namespace, script, resources=limits))
    run_id = (await h.run("hog")).run_id
    async with h.workers(1, **FAST):
        assert await h.until_finished(run_id, timeout=180) == "failed"
    [attempt] = await h.attempts(run_id, "job")
    message = attempt["error_message"]
    assert "OOMKilled, exit code 137" in message, message
    assert "held 512 MiB" not in message


async def test_cancelling_the_run_deletes_the_job_and_stops_the_container(
    h: Harness, kubectl: Kubectl, namespace: str, real_node: RealNode
) -> None:
    script = "import time\nprint('started', flush=True)\ntime.sleep(3600)"
    await h.apply(python_step("held", namespace, script))
    run_id = (await h.run("held")).run_id
    async with h.workers(1, **FAST):
        await until(lambda: printed(kubectl, namespace, run_id), "'started'", timeout=180)
        pod = only_pod(kubectl, namespace, run_id)["metadata"]["name"]
        assert pod in real_node.running_pods()

        # The container may print before the worker has committed the Job's handle; a cancel
        # then would be the submit race (tests/integration/engine/test_remote_failures.py).
        async def handle_held() -> bool:
            return any(a["handle"] is not None for a in await h.attempts(run_id))

        await eventually(handle_held, timeout=30, what="the Job's handle to be committed")
        assert await h.engine.runs.cancel(h.namespace, run_id, reason="test") == 1
        await until(lambda: not jobs(kubectl, namespace, run_id), "the Job to be deleted")
        await until(lambda: pod not in real_node.running_pods(), "the container to stop")
    assert await h.status(run_id) == "cancelled"


async def test_a_step_past_its_deadline_ends_through_active_deadline_seconds(
    h: Harness, kubectl: Kubectl, namespace: str, real_node: RealNode
) -> None:
    script = "import time\nprint('started', flush=True)\ntime.sleep(3600)"
    await h.apply(python_step("slow", namespace, script, timeout="5s"))
    run_id = (await h.run("slow")).run_id
    async with h.workers(1, **FAST):
        await until(lambda: printed(kubectl, namespace, run_id), "'started'", timeout=180)
        assert await h.until_finished(run_id, timeout=120) == "failed"
    [attempt] = await h.attempts(run_id, "job")
    assert "DeadlineExceeded" in attempt["error_message"], attempt
    [job] = jobs(kubectl, namespace, run_id)
    assert job["spec"]["activeDeadlineSeconds"] == 5

    def failed_at_deadline() -> bool:
        # The block finishes on FailureTarget; the Job controller sets Failed once the pod
        # has stopped.
        [found] = jobs(kubectl, namespace, run_id)
        conditions = found["status"].get("conditions") or []
        return any(c["type"] == "Failed" and c["reason"] == "DeadlineExceeded" for c in conditions)

    await until(failed_at_deadline, "the Job Failed with DeadlineExceeded")
    # The Job controller deleted the pod; the kubelet stopped its container.
    prefix = job["metadata"]["name"] + "-"
    await until(
        lambda: not any(p.startswith(prefix) for p in real_node.running_pods()), "no container"
    )
