"""Smoke tests: the cluster under the e2e suite behaves like Kubernetes, and our CRDs load.

Why: every later e2e test (operator, webhook, docker.run Jobs, Helm chart) stands on these
facts: the CRDs are accepted and enforce their schemas and CEL rules, Jobs run to an end
through kwok with the exit code a test asks for, and RBAC is really enforced.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from e2e.gwt import Given, objects_in
from e2e.harness.binaries import REPO_ROOT, pinned_versions
from e2e.harness.clusters import Cluster
from e2e.harness.kwok import EXIT_CODE_ANNOTATION
from e2e.kubectl import Kubectl, KubectlError
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

GROUP = "dirigent.dev"
VERSION = "v1alpha1"
KINDS = {
    "Pipeline": "pipelines",
    "Schedule": "schedules",
    "Webhook": "webhooks",
    "Connection": "connections",
}
CRD_DIR = REPO_ROOT / "crds"
EXAMPLES_DIR = REPO_ROOT / "examples"

# Used only for a kind that examples/ has no sample of yet.
FALLBACK_SAMPLES: dict[str, dict[str, Any]] = {
    "Pipeline": {"steps": {"greet": {"block": "noop"}}},
    "Schedule": {"pipeline": "hello", "cron": "0 5 * * *"},
    "Webhook": {"pipeline": "hello"},
    "Connection": {"type": "http", "settings": {"url": "https://example.invalid"}},
}


def crd_files() -> list[Path]:
    return sorted(CRD_DIR.glob(f"{GROUP}_*.yaml"))


@pytest.fixture(scope="module")
def crds_installed(cluster: Cluster) -> list[str]:
    """Apply every CRD in crds/ and wait until each is Established; returns their names."""
    files = crd_files()
    if not files:
        pytest.fail(f"no {GROUP}_*.yaml in {CRD_DIR}: generate them with `uv run dirigent crds`")
    kubectl = Kubectl(cluster.kubeconfig)
    names: list[str] = []
    for path in files:
        then = Given(kubectl, "default").manifest(path).when.applied().then
        then.condition("NamesAccepted", timeout=30).condition("Established", timeout=30)
        names += [r.name for r in then.refs]
    return names


def sample(kind: str, name: str) -> dict[str, Any]:
    """A valid object of ``kind``: the first one in examples/, else a minimal inline one."""
    for doc in objects_in(sorted(EXAMPLES_DIR.glob("**/*.yaml"))):
        if doc.get("kind") == kind and doc.get("apiVersion") == f"{GROUP}/{VERSION}":
            obj: dict[str, Any] = json.loads(json.dumps(doc))
            obj["metadata"] = {"name": name}
            return obj
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": kind,
        "metadata": {"name": name},
        "spec": FALLBACK_SAMPLES[kind],
    }


def test_apiserver_reports_the_pinned_version(cluster: Cluster, kubectl: Kubectl) -> None:
    version = json.loads(kubectl.run("version", "-o", "json").stdout)["serverVersion"]
    if cluster.origin == "local":
        assert version["gitVersion"] == pinned_versions()["KUBE_VERSION"]
    else:
        assert version["major"] == "1"


def test_every_crd_is_established(crds_installed: list[str]) -> None:
    assert sorted(crds_installed) == sorted(f"{plural}.{GROUP}" for plural in KINDS.values())


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_sample_of_each_kind_is_accepted(
    crds_installed: list[str], given: Given, namespace: str, kind: str
) -> None:
    then = given.objects(sample(kind, "hello")).when.applied().then
    obj = then.get()
    assert obj["kind"] == kind
    assert obj["metadata"]["namespace"] == namespace


@pytest.mark.parametrize("path", sorted(EXAMPLES_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_is_accepted(crds_installed: list[str], given: Given, path: Path) -> None:
    then = given.manifest(path).when.applied().then
    for ref in then.refs:
        assert then.of(ref.kind, ref.name).get()["metadata"]["uid"]


@pytest.mark.parametrize("kind", list(KINDS))
def test_an_unknown_field_is_refused(crds_installed: list[str], given: Given, kind: str) -> None:
    bad = sample(kind, "unknown-field")
    bad["spec"]["thisFieldDoesNotExist"] = {"nested": True}
    given.objects(bad).when.applied_expecting_refusal().then.refused_because(
        r'unknown field "spec\.thisFieldDoesNotExist"'
    )


# One field per kind given a value of the wrong type.
WRONG_TYPES: dict[str, dict[str, Any]] = {
    "Pipeline": {"steps": "not-a-map"},
    "Schedule": {"pipeline": 42},
    "Webhook": {"pipeline": ["not", "a", "string"]},
    "Connection": {"type": 7},
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_wrongly_typed_field_is_refused(
    crds_installed: list[str], given: Given, kind: str
) -> None:
    bad = sample(kind, "wrong-type")
    bad["spec"].update(WRONG_TYPES[kind])
    (field,) = WRONG_TYPES[kind]
    given.objects(bad).when.applied_expecting_refusal().then.refused_because(
        rf"spec\.{field}: Invalid value: .*must be of type"
    )


def test_a_step_name_that_is_no_identifier_is_refused(
    crds_installed: list[str], given: Given
) -> None:
    bad = sample("Pipeline", "bad-step")
    bad["spec"]["steps"] = {"Not-A-Step": {"block": "core.noop"}}
    given.objects(bad).when.applied_expecting_refusal().then.refused_because(
        r"spec\.steps: Invalid value: .*keys must match"
    )


@pytest.mark.parametrize("name", ["has.dots", "9lives"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_name_that_is_no_dns_label_is_refused_by_the_cel_rule(
    crds_installed: list[str], given: Given, kind: str, name: str
) -> None:
    # Both pass Kubernetes' own name check (a DNS subdomain) but are no DNS label starting
    # with a letter: only the CRD's CEL rule on metadata.name can refuse them.
    given.objects(sample(kind, name)).when.applied_expecting_refusal().then.refused_because(
        r"metadata\.name must be a DNS label"
    )


def _job(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": annotations or {}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox:1.36", "command": ["true"]}],
                },
            },
        },
    }


def _job_pod(kubectl: Kubectl, namespace: str, job: str) -> dict[str, Any]:
    pods = kubectl.json("get", "pods", "-n", namespace, "-l", f"batch.kubernetes.io/job-name={job}")
    assert len(pods["items"]) == 1, [p["metadata"]["name"] for p in pods["items"]]
    pod: dict[str, Any] = pods["items"][0]
    return pod


def test_a_job_runs_to_success_on_a_kwok_node(
    given: Given, kubectl: Kubectl, namespace: str
) -> None:
    then = given.objects(_job("ok")).when.applied().then
    then.condition("Complete", timeout=60).field("status.succeeded", equals=1)
    pod = _job_pod(kubectl, namespace, "ok")
    assert pod["status"]["phase"] == "Succeeded"
    assert pod["spec"]["nodeName"].startswith("kwok-node-") or pod["spec"]["nodeName"]
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0


def test_a_job_fails_with_the_exit_code_its_pod_asks_for(
    given: Given, kubectl: Kubectl, namespace: str
) -> None:
    job = _job("fails", annotations={EXIT_CODE_ANNOTATION: "3"})
    then = given.objects(job).when.applied().then
    then.condition("Failed", timeout=60).field("status.failed", equals=1)
    pod = _job_pod(kubectl, namespace, "fails")
    assert pod["status"]["phase"] == "Failed"
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3


def _access_review(
    kube_api: Any, user: str, namespace: str, verb: str, resource: str, group: str = ""
) -> bool:
    from kubernetes import client

    review = client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(
            user=user,
            groups=[
                "system:serviceaccounts",
                f"system:serviceaccounts:{namespace}",
                "system:authenticated",
            ],
            resource_attributes=client.V1ResourceAttributes(
                namespace=namespace, verb=verb, resource=resource, group=group
            ),
        )
    )
    result: Any = client.AuthorizationV1Api(kube_api).create_subject_access_review(review)
    return bool(result.status.allowed)


def test_rbac_denies_a_service_account_without_a_role(
    kube_api: Any, kubectl: Kubectl, namespace: str
) -> None:
    kubectl.run("create", "serviceaccount", "nobody", "-n", namespace)
    user = f"system:serviceaccount:{namespace}:nobody"

    assert not _access_review(kube_api, user, namespace, "list", "pods")
    assert not _access_review(kube_api, user, namespace, "create", "pipelines", GROUP)
    with pytest.raises(KubectlError, match=r"(?i)forbidden"):
        kubectl.run("get", "pods", "-n", namespace, f"--as={user}")

    # Control: the same account is allowed once a role grants it, so the denials above come
    # from RBAC, not from a broken review.
    kubectl.run("create", "role", "pod-reader", "-n", namespace, "--verb=list", "--resource=pods")
    kubectl.run(
        "create",
        "rolebinding",
        "nobody-reads",
        "-n",
        namespace,
        "--role=pod-reader",
        f"--serviceaccount={namespace}:nobody",
    )
    wait_until(
        lambda: _access_review(kube_api, user, namespace, "list", "pods"),
        timeout=10,
        every=0.2,
        what="the role binding taking effect",
    )
    kubectl.run("get", "pods", "-n", namespace, f"--as={user}")
    assert not _access_review(kube_api, user, namespace, "create", "pipelines", GROUP)
