"""Plain Kubernetes Jobs on the real node: real containers, real exit codes, real logs.

Why: kwok finishes pods by annotation; these tests prove what only a kubelet can: a Python
process runs in ``localhost/dirigent/base:bookworm`` and its printed output comes back
through ``kubectl logs`` and the API, its exit code reaches the pod status and the Job,
``activeDeadlineSeconds`` stops a running container, and a memory limit is enforced by the
kernel. They also prove the node's taint keeps every other pod on the kwok nodes.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from e2e.gwt import Given, dig
from e2e.harness.images import BASE_IMAGE
from e2e.harness.realnode import LABEL, RealNode, placement
from e2e.kubectl import Kubectl

pytestmark = pytest.mark.e2e


def real_job(
    name: str,
    script: str,
    *,
    job: dict[str, Any] | None = None,
    container: dict[str, Any] | None = None,
    place: bool = True,
) -> dict[str, Any]:
    """A Job running ``python3 -c script`` once in the base image on the real node."""
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 2,
        "containers": [
            {
                "name": "main",
                "image": BASE_IMAGE,
                "imagePullPolicy": "Never",
                "command": ["python3", "-c", script],
                **(container or {}),
            }
        ],
    }
    if place:
        pod_spec.update(placement())
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"backoffLimit": 0, **(job or {}), "template": {"spec": pod_spec}},
    }


def job_pods(kubectl: Kubectl, namespace: str, job: str) -> list[dict[str, Any]]:
    selector = f"batch.kubernetes.io/job-name={job}"
    items: list[dict[str, Any]] = kubectl.json("get", "pods", "-n", namespace, "-l", selector)[
        "items"
    ]
    return items


def only_pod(kubectl: Kubectl, namespace: str, job: str) -> dict[str, Any]:
    pods = job_pods(kubectl, namespace, job)
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    return pods[0]


def terminated(pod: dict[str, Any]) -> dict[str, Any]:
    state = dig(pod, "status.containerStatuses[0].state.terminated")
    assert isinstance(state, dict), pod.get("status")
    return state


def test_a_python_job_runs_for_real_and_its_log_comes_back(
    real_node: RealNode, given: Given, kubectl: Kubectl, kube_api: Any, namespace: str
) -> None:
    from kubernetes import client

    nonce = uuid.uuid4().hex
    # Output no simulator could make up: a value computed in the container and a nonce
    # that reaches it only through the pod's environment.
    script = (
        "import os, sys; print('sum', sum(range(10**6))); "
        "print('nonce', os.environ['NONCE']); print('python', sys.version_info[:2] >= (3, 11))"
    )
    job = real_job("hello", script, container={"env": [{"name": "NONCE", "value": nonce}]})
    then = given.objects(job).when.applied().then
    then.condition("Complete", timeout=120).field("status.succeeded", equals=1)

    pod = only_pod(kubectl, namespace, "hello")
    assert pod["spec"]["nodeName"] == real_node.node_name
    state = terminated(pod)
    assert (state["exitCode"], state["reason"]) == (0, "Completed")
    assert state["containerID"].startswith("containerd://")

    expected = f"sum 499999500000\nnonce {nonce}\npython True\n"
    assert kubectl.run("logs", "-n", namespace, "job/hello").stdout == expected
    core: Any = client.CoreV1Api(kube_api)
    assert core.read_namespaced_pod_log(pod["metadata"]["name"], namespace) == expected


def test_a_job_exiting_3_fails_with_exit_code_3_and_keeps_its_log(
    real_node: RealNode, given: Given, kubectl: Kubectl, namespace: str
) -> None:
    script = "import sys; print('about to fail', flush=True); sys.exit(3)"
    then = given.objects(real_job("fails", script)).when.applied().then
    then.condition("Failed", timeout=120).field("status.failed", equals=1)

    pod = only_pod(kubectl, namespace, "fails")
    assert pod["spec"]["nodeName"] == real_node.node_name
    assert pod["status"]["phase"] == "Failed"
    state = terminated(pod)
    assert (state["exitCode"], state["reason"]) == (3, "Error")
    assert kubectl.run("logs", "-n", namespace, "job/fails").stdout == "about to fail\n"


def test_a_job_past_its_active_deadline_is_stopped_as_deadline_exceeded(
    real_node: RealNode, given: Given, kubectl: Kubectl, namespace: str
) -> None:
    script = "import time; print('started', flush=True); time.sleep(3600)"
    job = real_job("slow", script, job={"activeDeadlineSeconds": 4})
    then = given.objects(job).when.applied().then
    # The container really ran before the deadline (its log line is there) ...
    then.field("status.active", equals=1, timeout=120)
    pod_name = only_pod(kubectl, namespace, "slow")["metadata"]["name"]
    then.eventually(
        lambda _: kubectl.run("logs", "-n", namespace, pod_name, check=False).stdout == "started\n",
        "the container printed 'started'",
        timeout=60,
    )
    # ... and the Job controller ends it at the deadline, not the hour-long sleep.
    then.condition("Failed", timeout=60).field(
        "status.conditions",
        matches=lambda cs: any(
            c["type"] == "Failed" and c.get("reason") == "DeadlineExceeded" for c in cs
        ),
    )
    # The pod is deleted only once the kubelet has stopped its container.
    then.eventually(
        lambda _: not job_pods(kubectl, namespace, "slow"),
        "the Job's pod is gone (its container stopped)",
        timeout=60,
    )
    assert pod_name not in real_node.running_pods()


def test_a_container_over_its_memory_limit_is_oom_killed(
    real_node: RealNode, given: Given, kubectl: Kubectl, namespace: str
) -> None:
    # Touch 16 MiB blocks until 512 MiB: far past the 64 MiB limit.
    script = (
        "blocks = []\n"
        "for i in range(32):\n"
        "    blocks.append(bytes([i % 251 + 1]) * (16 << 20))\n"
        "    print('held', (i + 1) * 16, 'MiB', flush=True)\n"
    )
    limits = {"resources": {"limits": {"memory": "64Mi"}, "requests": {"memory": "64Mi"}}}
    then = given.objects(real_job("hog", script, container=limits)).when.applied().then
    then.condition("Failed", timeout=120)

    state = terminated(only_pod(kubectl, namespace, "hog"))
    assert (state["exitCode"], state["reason"]) == (137, "OOMKilled")
    log = kubectl.run("logs", "-n", namespace, "job/hog").stdout
    assert "held 512 MiB" not in log, log


def test_pods_that_do_not_tolerate_the_taint_never_land_on_the_real_node(
    real_node: RealNode, given: Given, kubectl: Kubectl, namespace: str
) -> None:
    # Asks for the real node by label but lacks the toleration: unschedulable.
    intruder = real_job("intruder", "print('no')", place=False)
    intruder["spec"]["template"]["spec"]["nodeSelector"] = {LABEL: "true"}
    # Asks for nothing: lands on a kwok node as before the real node existed.
    plain = real_job("plain", "print('kwok')", place=False)
    both = given.objects(intruder, plain).when.applied().then
    both.of("Job", "plain").condition("Complete", timeout=60)
    assert only_pod(kubectl, namespace, "plain")["spec"]["nodeName"].startswith("kwok-node-")

    def unschedulable() -> bool:
        pod = only_pod(kubectl, namespace, "intruder")
        conds = dig(pod, "status.conditions")
        return "nodeName" not in pod["spec"] and any(
            c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
            for c in (conds if isinstance(conds, list) else [])
        )

    both.of("Job", "intruder").eventually(
        lambda _: unschedulable(), "the intruder pod is Unschedulable", timeout=60
    )
    node = kubectl.json("get", "node", real_node.node_name)
    assert node["metadata"]["labels"][LABEL] == "true"
    assert {"key": LABEL, "value": "true", "effect": "NoSchedule"} in node["spec"]["taints"]
