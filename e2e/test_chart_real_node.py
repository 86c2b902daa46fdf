"""The Helm chart for real: dirigent's own image runs on the real node, and runs a container.

Given the project image built by ``make image`` and imported into the real node's
containerd, an embedded PostgreSQL on the host's loopback (opened to the node's pods) and the
harness's values (``e2e.harness.chartnode``), when ``helm install`` runs, then the migrate
hook, the operator, the API and a worker run as real processes on the node's pod network
and become Ready through their own probes; a second API replica runs beside the first; a Pipeline applied with ``kubectl apply -f`` becomes Ready; a run started through
the API runs its ``docker.run`` step as a real container; ``kubectl get pipelines`` shows
the run; ``helm uninstall`` keeps the CRDs, the Pipeline and the run history.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from dirigent.api.client import Client
from dirigent.engine import EmbeddedPostgres
from e2e.engine import EngineClient
from e2e.harness import chartnode
from e2e.harness.clusters import Cluster
from e2e.harness.images import BASE_IMAGE
from e2e.harness.processes import wait_until
from e2e.harness.realnode import RealNode
from e2e.helm import CHART, Helm
from e2e.kubectl import Kubectl
from tests.support.waiting import WaitTimedOut, eventually

pytestmark = pytest.mark.e2e

PIPELINE = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: hello-container, namespace: {ns}}}
spec:
  steps:
    greet:
      block: docker.run
      poll: 500ms
      config:
        image: {image}
        imagePullPolicy: Never
        command: [python3, -c, "import platform; print('hello from', platform.python_version(), '{nonce}')"]
"""


@pytest.fixture
def postgres(tmp_path: Path) -> Iterator[EmbeddedPostgres]:
    with EmbeddedPostgres(tmp_path / "pgdata") as server:
        yield server


def _pods(kubectl: Kubectl, namespace: str, component: str) -> list[dict[str, Any]]:
    selector = f"app.kubernetes.io/component={component}"
    items: list[dict[str, Any]] = kubectl.json("get", "pods", "-n", namespace, "-l", selector)[
        "items"
    ]
    return items


def _at(stamp: str) -> dt.datetime:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def pod_start_seconds(pod: dict[str, Any]) -> dict[str, float]:
    """Seconds from the pod's creation to its container started and to Ready (1 s stamps)."""
    created = _at(pod["metadata"]["creationTimestamp"])
    started = _at(pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"])
    ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    return {
        "started": (started - created).total_seconds(),
        "ready": (_at(ready["lastTransitionTime"]) - created).total_seconds(),
    }


@dataclass
class Install:
    """One release of the chart on the real node, and what its steps share."""

    kubectl: Kubectl
    helm: Helm
    namespace: str
    release: str

    @property
    def fullname(self) -> str:
        return f"{self.release}-dirigent"


def _helm_install(install: Install, values: Path) -> None:
    """``helm install --wait``: every Deployment Available, i.e. its pods passed their
    readiness probes; the migrate hook ran as a Job; each process is a real container."""
    kubectl, namespace = install.kubectl, install.namespace
    installed = install.helm.run("install", install.release, str(CHART), "-n", namespace,
                                 "-f", str(values), "--wait", "--timeout", "300s", check=False)  # fmt: skip
    assert installed.returncode == 0, installed.stderr + _pod_logs(kubectl, namespace)
    migrate = kubectl.json("get", "job", f"{install.fullname}-migrate", "-n", namespace)
    assert migrate["status"].get("succeeded") == 1


def _the_processes_are_real_containers(install: Install, node: RealNode) -> None:
    cidr = ipaddress.ip_network(node.network.cidr)
    for component in chartnode.COMPONENTS:
        [pod] = _pods(install.kubectl, install.namespace, component)
        assert pod["spec"]["nodeName"] == node.node_name, component
        assert not pod["spec"].get("hostNetwork"), component
        assert ipaddress.ip_address(pod["status"]["podIP"]) in cidr, pod["status"]["podIP"]
        [status] = pod["status"]["containerStatuses"]
        assert status["ready"] and status["containerID"].startswith("containerd://")
        assert status["restartCount"] == 0, (component, status)
        print(f"pod start {component}: {pod_start_seconds(pod)}")


def _a_second_api_replica_runs_beside_the_first(install: Install) -> None:
    """Same containerPort, same node: on the host network the second would stay Pending."""
    kubectl, namespace = install.kubectl, install.namespace
    deployment = f"{install.fullname}-api"
    kubectl.run("scale", "deployment", deployment, "-n", namespace, "--replicas=2")
    kubectl.run("rollout", "status", "deployment", deployment, "-n", namespace, "--timeout=120s")
    pods = _pods(kubectl, namespace, "api")
    assert len(pods) == 2 and len({p["status"]["podIP"] for p in pods}) == 2, pods
    assert all(p["status"]["containerStatuses"][0]["ready"] for p in pods)
    kubectl.run("scale", "deployment", deployment, "-n", namespace, "--replicas=1")
    kubectl.run("rollout", "status", "deployment", deployment, "-n", namespace, "--timeout=120s")


def _two_of_each_are_ready_and_the_leader_hands_over(install: Install, values: Path) -> None:
    """Two operators, two APIs, two workers, all Ready by their real probes (a standby
    operator that opened no port was killed by its liveness probe); a ``helm upgrade`` of a
    changed value completes (it never did: maxUnavailable 0 waited on a standby that never
    became Ready); deleting the leader's pod hands the Lease over within 30 s, to the standby
    or to the Deployment's replacement pod: whichever asks first once the leader lets go (on a
    busy machine the leader's release is slow and the fresh pod can win)."""
    kubectl, namespace = install.kubectl, install.namespace
    upgraded = install.helm.run(
        "upgrade", install.release, str(CHART), "-n", namespace, "-f", str(values),
        "--set", "operator.replicas=2", "--set", "api.replicas=2", "--set", "worker.replicas=2",
        "--set", "settings.stuckRun=2h", "--wait", "--timeout", "300s", check=False,
    )  # fmt: skip
    assert upgraded.returncode == 0, upgraded.stderr + _pod_logs(kubectl, namespace)
    for component in ("operator", "api", "worker"):

        def two_ready(component: str = component) -> bool:
            # The rollout's old pods linger while they terminate: count the live ones.
            live = [p for p in _pods(kubectl, namespace, component)
                    if not p["metadata"].get("deletionTimestamp")]  # fmt: skip
            statuses = [c for p in live for c in p["status"].get("containerStatuses") or []]
            return len(live) == 2 and len(statuses) == 2 and all(c["ready"] for c in statuses)

        wait_until(two_ready, what=f"two {component} pods Ready by their probes", timeout=120)

    def holder() -> str:
        lease = kubectl.json("get", "lease", f"{install.fullname}-operator", "-n", namespace)
        return str(lease["spec"].get("holderIdentity") or "")

    def live_operators() -> set[str]:
        return {p["metadata"]["name"] for p in _pods(kubectl, namespace, "operator")
                if not p["metadata"].get("deletionTimestamp")}  # fmt: skip

    # Right after the rollout the Lease may still name a replaced pod (released or expiring).
    wait_until(lambda: holder() in live_operators(), what="a live operator leading", timeout=60)
    leader = holder()
    kubectl.run("delete", "pod", leader, "-n", namespace, "--wait=false")
    wait_until(
        # The standby, or the Deployment's replacement pod if it wins the race: any live
        # operator but the deleted one.
        lambda: holder() not in ("", leader) and holder() in live_operators(),
        what="another live operator holding the Lease",
        timeout=30,
    )


def _helm_test_passes(install: Install) -> None:
    """``helm test`` runs the chart's test hook Pod for real: it asks the API for
    /health/ready, exits 0, and helm reports it Succeeded (then its hook-delete-policy
    removes it). Only the real node can make it Succeeded: kwok keeps a Pod that no Job owns
    Running (e2e/test_chart.py)."""
    tested = install.helm.run("test", install.release, "-n", install.namespace,
                              "--timeout", "120s", check=False)  # fmt: skip
    assert tested.returncode == 0, tested.stdout + tested.stderr
    hook = f"{install.fullname}-test-api"
    assert re.search(rf"TEST SUITE:\s+{hook}", tested.stdout), tested.stdout
    assert re.search(r"Phase:\s+Succeeded", tested.stdout), tested.stdout

    def deleted() -> bool:  # hook-delete-policy: hook-succeeded (the kubelet confirms it)
        found = install.kubectl.run("get", "pod", hook, "-n", install.namespace, check=False)
        return found.returncode != 0 and "NotFound" in found.stderr

    wait_until(deleted, what=f"the succeeded test Pod {hook} deleted", timeout=60)


def _a_pipeline_runs_a_real_container(
    install: Install, postgres: EmbeddedPostgres, key: str, node_name: str
) -> tuple[EngineClient, int]:
    """``kubectl apply -f`` a Pipeline, run it through the API: its docker.run step runs a
    real container on the real node and the run succeeds with its output."""
    kubectl, namespace = install.kubectl, install.namespace
    nonce = uuid.uuid4().hex
    kubectl.run(
        "apply", "-f", "-", stdin=PIPELINE.format(ns=namespace, image=BASE_IMAGE, nonce=nonce)
    )

    def ready() -> bool:
        found = kubectl.json("get", "pipeline", "hello-container", "-n", namespace)
        conditions = found.get("status", {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    wait_until(ready, what="the Pipeline Ready", timeout=60)
    token = chartnode.admin_token(kubectl, namespace)
    url = chartnode.api_url(kubectl, namespace, install.release)
    run_id, state = asyncio.run(_run_through_the_api(url, token, namespace))
    assert state == "succeeded", state

    engine = EngineClient(postgres.url, key)
    [attempt] = engine.attempts(namespace, run_id, "greet")
    assert attempt.output["exit_code"] == 0
    assert attempt.output["log_tail"].startswith("hello from 3.11")
    assert attempt.output["log_tail"].endswith(f"{nonce}\n")
    [job_pod] = kubectl.json("get", "pods", "-n", namespace, "-l", f"dirigent.dev/run={run_id}")[
        "items"
    ]
    assert job_pod["spec"]["nodeName"] == node_name
    return engine, run_id


NETWORKED = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: reach-the-api, namespace: {ns}}}
spec:
  steps:
{steps}
"""
# The policy agent programs a new NetworkPolicy within a second or two of the Job's creation;
# the dial waits past that, so what it proves is the policy in force (docs/security.md says
# a pod's very first instants may precede it).
DIAL = (
    "import socket, time; time.sleep(5); "
    "socket.create_connection(('{host}', {port}), timeout=3); print('reached')"
)


def _a_tenant_namespace_runs_jobs_without_hand_made_rbac_and_without_network(
    install: Install, tenant: str, engine: EngineClient
) -> None:
    """A Pipeline in a tenant namespace the chart serves (no Role made by hand) runs its
    docker.run steps there; the pod of a step that did not ask for network cannot reach the
    dirigent API (the Job's default-deny NetworkPolicy, enforced on the real node), the pod
    of a step with ``network: true`` can."""
    kubectl, namespace = install.kubectl, install.namespace
    url = chartnode.api_url(kubectl, namespace, install.release)
    host, port = url.removeprefix("http://").rsplit(":", 1)
    program = DIAL.format(host=host, port=port)
    steps = "".join(
        f"    {name}:\n      block: docker.run\n      poll: 500ms\n      config:\n"
        f"        image: {BASE_IMAGE}\n        imagePullPolicy: Never\n{extra}"
        f'        command: [python3, -c, "{program}"]\n'
        for name, extra in (("closed", ""), ("open", "        network: true\n"))
    )
    kubectl.run("apply", "-f", "-", stdin=NETWORKED.format(ns=tenant, steps=steps))

    def ready() -> bool:
        found = kubectl.json("get", "pipeline", "reach-the-api", "-n", tenant)
        conditions = found.get("status", {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    wait_until(ready, what="the tenant's Pipeline Ready", timeout=60)
    token = chartnode.admin_token(kubectl, namespace, name="dirigent-tenant-check")
    run_id, state = asyncio.run(_run_through_the_api(url, token, tenant, "reach-the-api"))
    assert state == "failed", state  # the closed step failed; the open one did not
    jobs = kubectl.json("get", "jobs", "-n", tenant, "-l", f"dirigent.dev/run={run_id}")
    assert len(jobs["items"]) == 2  # both ran in the tenant's namespace
    [closed] = engine.attempts(tenant, run_id, "closed")
    [opened] = engine.attempts(tenant, run_id, "open")
    assert (closed.status, opened.status) == ("failed", "succeeded"), (closed, opened)
    assert opened.output["log_tail"].strip() == "reached"


def _kubectl_get_pipelines_shows_the_run(install: Install) -> None:
    kubectl, namespace = install.kubectl, install.namespace

    def listed() -> bool:
        table = kubectl.run("get", "pipelines", "-n", namespace).stdout
        return "hello-container" in table and "Succeeded" in table

    try:
        wait_until(listed, what="kubectl get pipelines showing the run", timeout=60)
    except WaitTimedOut:
        table = kubectl.run("get", "pipelines", "-n", namespace, "-o", "yaml").stdout
        raise AssertionError(table + _pod_logs(kubectl, namespace)) from None


def _uninstall_keeps_crds_and_history(install: Install, engine: EngineClient, run_id: int) -> None:
    kubectl, namespace = install.kubectl, install.namespace
    install.helm.run("uninstall", install.release, "-n", namespace, "--wait", "--timeout", "120s")
    assert kubectl.json("get", "deployments", "-n", namespace)["items"] == []
    for crd in chartnode.CRDS:
        kept = kubectl.json("get", "crd", crd)
        assert kept["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert kubectl.json("get", "pipeline", "hello-container", "-n", namespace)
    assert engine.run(namespace, run_id).status == "succeeded"  # the history is kept


def _clean_up(install: Install) -> None:
    kubectl, namespace, release = install.kubectl, install.namespace, install.release
    install.helm.run("uninstall", release, "-n", namespace, check=False)
    # No operator is left to remove its finalizer; the namespace must be deletable.
    kubectl.run("patch", "pipeline", "hello-container", "-n", namespace, "--type=merge",
                "-p", '{"metadata":{"finalizers":null}}', check=False)  # fmt: skip
    for account in ("dirigent-demo", "dirigent-tenant-check"):
        kubectl.run("delete", "clusterrolebinding", f"{namespace}-{account}", check=False)
    kubectl.run("delete", "clusterrole,clusterrolebinding", "-l",
                f"app.kubernetes.io/instance={release}", "--wait=false", check=False)  # fmt: skip


@pytest.mark.timeout(1500)  # a cold `make image` builds the Debian base first
def test_helm_install_runs_dirigent_and_a_real_container(
    real_node: RealNode,
    cluster: Cluster,
    kubectl: Kubectl,
    namespace: str,
    postgres: EmbeddedPostgres,
    tmp_path: Path,
) -> None:
    image = chartnode.build_project_image()
    chartnode.load_project_image(real_node, image)
    key = chartnode.new_secret_key()
    database_url = chartnode.pod_database_url(real_node, postgres.url)
    kubectl.run("apply", "-f", "-", stdin=chartnode.secrets_manifest(namespace, database_url, key))
    install = Install(
        kubectl=kubectl,
        helm=Helm(kubeconfig=cluster.kubeconfig),
        namespace=namespace,
        release=f"r{uuid.uuid4().hex[:6]}",
    )
    chartnode.adopt_crds(kubectl, install.release, namespace)
    tenant = f"{namespace}-c"  # a team's namespace: the chart serves it, nobody made RBAC there
    kubectl.run("create", "namespace", tenant)
    chart_values = chartnode.values(image, install.release)
    chart_values["tenants"] = {"namespaces": [namespace, tenant]}
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(chart_values))
    try:
        _helm_install(install, values)
        _the_processes_are_real_containers(install, real_node)
        _a_second_api_replica_runs_beside_the_first(install)
        _two_of_each_are_ready_and_the_leader_hands_over(install, values)
        _helm_test_passes(install)
        engine, run_id = _a_pipeline_runs_a_real_container(
            install, postgres, key, real_node.node_name
        )
        _kubectl_get_pipelines_shows_the_run(install)
        _a_tenant_namespace_runs_jobs_without_hand_made_rbac_and_without_network(
            install, tenant, engine
        )
        _uninstall_keeps_crds_and_history(install, engine, run_id)
    finally:
        _clean_up(install)
        kubectl.run("patch", "pipeline", "reach-the-api", "-n", tenant, "--type=merge",
                    "-p", '{"metadata":{"finalizers":null}}', check=False)  # fmt: skip
        kubectl.run("delete", "namespace", tenant, "--wait=false", check=False)


def _pod_logs(kubectl: Kubectl, namespace: str) -> str:
    """Every pod's last log lines and the namespace's events: why a pod is not Ready."""
    out = [kubectl.run("get", "events", "-n", namespace, check=False).stdout[-3000:]]
    for component in chartnode.COMPONENTS:
        selector = f"app.kubernetes.io/component={component}"
        logs = kubectl.run("logs", "-n", namespace, "-l", selector, "--tail=20", check=False)
        out.append(f"--- {component}\n{logs.stdout[-3000:]}{logs.stderr[-500:]}")
    return "\n".join(out)


async def _run_through_the_api(
    url: str, token: str, namespace: str, pipeline: str = "hello-container"
) -> tuple[int, str]:
    async with Client(url, token) as api:
        created = await api.run(namespace, pipeline)
        run = await eventually(
            lambda: api.get_run(namespace, created.run_id),
            lambda r: r.status in ("succeeded", "failed", "cancelled", "completed_with_errors"),
            timeout=180,
            every=0.2,
            what=f"run {created.run_id} finished",
        )
        return created.run_id, run.status
