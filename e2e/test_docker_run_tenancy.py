"""docker.run on a shared cluster, against the real API server: what a Job gets and whose it is.

Given the engine and workers of ``test_docker_run`` and the e2e control plane (kwok pods, a
real kube-apiserver that stores NetworkPolicies and runs the garbage collector, no CNI to
enforce them: the policy the block sends and its ownership are what is checked here; the
real-node proof of enforcement is separate).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from e2e.kubectl import Kubectl
from e2e.test_docker_run import (
    FAST,
    PENDING_FOREVER,
    RBAC,
    apply_connection,
    docker_pipeline,
    h,
    jobs,
    secret_of,
    start,
    token_kubeconfig,
    until,
    until_waiting,
)
from tests.support.harness import Harness
from tests.support.postgres import database_factory, db_url, make_database, pg_server, pg_template

pytestmark = pytest.mark.e2e
__all__ = ["database_factory", "db_url", "h", "make_database", "pg_server", "pg_template"]


def policies(kubectl: Kubectl, namespace: str, run_id: int) -> list[dict[str, Any]]:
    found = kubectl.json(
        "get", "networkpolicies", "-n", namespace, "-l", f"dirigent.dev/run={run_id}"
    )
    items: list[dict[str, Any]] = found["items"]
    return items


async def test_a_job_owns_a_network_policy_that_gives_its_pods_no_network(
    h: Harness, kubectl: Kubectl, namespace: str
) -> None:
    await h.apply(docker_pipeline("quiet", namespace, resources=PENDING_FOREVER))
    run_id = await start(h, "quiet")
    async with h.workers(1, **FAST):
        await until_waiting(h, run_id)
        [job] = jobs(kubectl, namespace, run_id)
        [policy] = policies(kubectl, namespace, run_id)
        assert policy["metadata"]["name"] == job["metadata"]["name"]
        [owner] = policy["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"]) == ("Job", job["metadata"]["uid"])
        spec = policy["spec"]
        assert spec["policyTypes"] == ["Ingress", "Egress"]
        assert not spec.get("ingress") and not spec.get("egress")  # nothing in, nothing out
        selector = spec["podSelector"]["matchLabels"]
        pod_labels = job["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= pod_labels.items()
        assert pod_labels["dirigent.dev/network"] == "none"
        # The pod the Job made is the one the policy selects.
        pods = kubectl.json(
            "get", "pods", "-n", namespace, "-l", f"job-name={job['metadata']['name']}"
        )
        assert pods["items"] and all(
            selector.items() <= p["metadata"]["labels"].items() for p in pods["items"]
        )
        assert await h.engine.runs.cancel(h.namespace, run_id, reason="test") == 1
    await until(lambda: not policies(kubectl, namespace, run_id), "the policy to be deleted")


async def test_the_collector_deletes_the_policy_with_its_job(
    h: Harness, kubectl: Kubectl, namespace: str
) -> None:
    await h.apply(docker_pipeline("collected", namespace, resources=PENDING_FOREVER))
    run_id = await start(h, "collected")
    async with h.workers(1, **FAST):
        await until_waiting(h, run_id)
        [job] = jobs(kubectl, namespace, run_id)
        name = job["metadata"]["name"]
        [policy] = policies(kubectl, namespace, run_id)
        assert policy["metadata"]["name"] == name
        # Deleted behind the engine's back, as ttlSecondsAfterFinished deletes a finished
        # Job: the policy goes with it, though nobody deleted it by name.
        kubectl.run("delete", "job", name, "-n", namespace, "--cascade=background", "--wait=false")
        await until(lambda: not policies(kubectl, namespace, run_id), "the collector", 60)
        await h.engine.runs.cancel(h.namespace, run_id, reason="test")


async def test_a_step_asking_for_destinations_gets_egress_to_those_only(
    h: Harness, kubectl: Kubectl, namespace: str
) -> None:
    network = [{"cidr": "10.96.0.0/12", "ports": [443]}]
    await h.apply(docker_pipeline("some", namespace, resources=PENDING_FOREVER, network=network))
    run_id = await start(h, "some")
    async with h.workers(1, **FAST):
        await until_waiting(h, run_id)
        [job] = jobs(kubectl, namespace, run_id)
        [policy] = policies(kubectl, namespace, run_id)
        [to_service, dns] = policy["spec"]["egress"]
        assert to_service == {
            "to": [{"ipBlock": {"cidr": "10.96.0.0/12"}}],
            "ports": [{"protocol": "TCP", "port": 443}],
        }
        assert {p["port"] for p in dns["ports"]} == {53}
        annotations = job["spec"]["template"]["metadata"]["annotations"]
        assert json.loads(annotations["dirigent.dev/network-destinations"]) == network
        await h.engine.runs.cancel(h.namespace, run_id, reason="test")


async def test_a_step_asking_for_the_network_gets_no_policy_and_says_so(
    h: Harness, kubectl: Kubectl, namespace: str
) -> None:
    await h.apply(docker_pipeline("open", namespace, network=True))
    run_id = await start(h, "open")
    async with h.workers(1, **FAST):
        assert await h.until_finished(run_id, timeout=60) == "succeeded"
    [job] = jobs(kubectl, namespace, run_id)
    assert job["metadata"]["labels"]["dirigent.dev/network"] == "open"
    assert policies(kubectl, namespace, run_id) == []


async def test_another_installations_job_of_the_same_name_is_never_adopted_nor_deleted(
    h: Harness, kubectl: Kubectl, namespace: str
) -> None:
    # What a second, differently named installation sharing the namespace could leave under
    # this attempt's name: same attempt id, its own installation label.
    await h.apply(docker_pipeline("twin", namespace))
    run_id = await start(h, "twin")
    [attempt] = await h.attempts(run_id, "job")
    name = f"dirigent-{run_id}-{attempt['id']}"
    kubectl.run("create", "job", name, "-n", namespace, "--image=busybox:1.36", "--", "true")
    kubectl.run(
        "label", "job", name, "-n", namespace,
        f"dirigent.dev/attempt={attempt['id']}", "dirigent.dev/installation=other",
    )  # fmt: skip
    async with h.workers(1, **FAST):
        assert await h.until_finished(run_id, timeout=60) == "failed"
    [attempt] = await h.attempts(run_id, "job")
    assert (attempt["error_code"], attempt["error_class"]) == ("docker.job.foreign", "rejected")
    theirs = kubectl.json("get", "job", name, "-n", namespace)
    assert theirs["metadata"]["labels"]["dirigent.dev/installation"] == "other"  # untouched


async def test_another_installations_secret_of_the_same_name_is_never_overwritten(
    h: Harness, kubectl: Kubectl, namespace: str
) -> None:
    await apply_connection(h)
    await h.apply(
        docker_pipeline(
            "twin", namespace, connection="warehouse", envFromConnection={"API_TOKEN": "token"}
        )
    )
    run_id = await start(h, "twin")
    [attempt] = await h.attempts(run_id, "job")
    name = f"dirigent-{run_id}-{attempt['id']}"
    kubectl.run(
        "create", "secret", "generic", name, "-n", namespace, "--from-literal=API_TOKEN=theirs"
    )
    kubectl.run(
        "label", "secret", name, "-n", namespace,
        f"dirigent.dev/attempt={attempt['id']}", "dirigent.dev/installation=other",
    )  # fmt: skip
    async with h.workers(1, **FAST):
        assert await h.until_finished(run_id, timeout=60) == "failed"
    [attempt] = await h.attempts(run_id, "job")
    assert attempt["error_code"] == "docker.job.foreign"
    assert attempt["error_message"].startswith(f"Secret {namespace}/{name} exists")
    secret = secret_of(kubectl, namespace, name)
    assert secret is not None
    assert base64.b64decode(secret["data"]["API_TOKEN"]).decode() == "theirs"
    assert jobs(kubectl, namespace, run_id) == []  # no Job made without its Secret


async def test_a_named_installation_names_and_labels_its_jobs(
    h: Harness, kubectl: Kubectl, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIRIGENT_KUBE_INSTALLATION", "blue")
    await h.apply(docker_pipeline("blue", namespace))
    run_id = await start(h, "blue")
    [attempt] = await h.attempts(run_id, "job")
    # An unnamed installation's Job under the plain name is none of its business.
    plain = f"dirigent-{run_id}-{attempt['id']}"
    kubectl.run("create", "job", plain, "-n", namespace, "--image=busybox:1.36", "--", "true")
    kubectl.run("label", "job", plain, "-n", namespace, f"dirigent.dev/run={run_id}")
    async with h.workers(1, **FAST):
        assert await h.until_finished(run_id, timeout=60) == "succeeded"
    [attempt] = await h.attempts(run_id, "job")
    ours = [j for j in jobs(kubectl, namespace, run_id) if j["metadata"]["name"] != plain]
    [job] = ours
    assert job["metadata"]["name"] == attempt["output"]["job"]
    assert job["metadata"]["name"].endswith(f"-{run_id}-{attempt['id']}")
    assert job["metadata"]["labels"]["dirigent.dev/installation"] == "blue"


async def test_a_namespace_the_installation_does_not_allow_is_refused_before_any_object(
    h: Harness, kubectl: Kubectl, namespace: str
) -> None:
    await h.apply(
        """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: elsewhere}
spec:
  params: {type: object, properties: {ns: {type: string}}}
  steps:
    job: {block: docker.run, config: {image: busybox, namespace: '${params.ns}'}}
"""
    )
    run = await h.run("elsewhere", {"ns": "kube-system"})
    async with h.workers(1, **FAST):
        assert await h.until_finished(run.run_id, timeout=60) == "failed"
    [attempt] = await h.attempts(run.run_id, "job")
    assert (attempt["error_code"], attempt["error_class"]) == (
        "docker.namespace.refused",
        "rejected",
    )
    assert attempt["error_message"].startswith("config.namespace: ")
    assert jobs(kubectl, "kube-system", run.run_id) == []


async def test_an_api_refusal_names_the_verb_the_resource_and_the_namespace(
    h: Harness,
    kubectl: Kubectl,
    namespace: str,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The worker's identity may run Jobs here but not make their NetworkPolicies.
    narrow = RBAC.replace(
        "- {{apiGroups: [networking.k8s.io], resources: [networkpolicies], "
        "verbs: [create, patch, delete]}}\n",
        "",
    )
    assert narrow != RBAC
    kubectl.run("apply", "-f", "-", stdin=narrow.format(ns=namespace))
    monkeypatch.setenv(
        "DIRIGENT_KUBE_KUBECONFIG", str(token_kubeconfig(kubectl, namespace, tmp_path / "kc"))
    )
    await h.apply(docker_pipeline("denied", namespace))
    run_id = await start(h, "denied")
    async with h.workers(1, **FAST):
        assert await h.until_finished(run_id, timeout=60) == "failed"
    [attempt] = await h.attempts(run_id, "job")
    assert (attempt["error_code"], attempt["error_class"]) == ("docker.api", "rejected")
    message = attempt["error_message"]
    assert f"403 (Forbidden) to create networkpolicies in namespace '{namespace}'" in message
    assert "grant it a Role in that namespace" in message
    assert jobs(kubectl, namespace, run_id) == []
