"""RBAC: the operator runs on its own least-privilege ClusterRole, and people's roles
aggregate into view / edit / admin with the verbs docs/security.md documents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.gwt import Given
from e2e.harness.binaries import REPO_ROOT
from e2e.harness.processes import wait_until
from e2e.kubectl import Kubectl

pytestmark = pytest.mark.e2e

RBAC = REPO_ROOT / "config" / "rbac"
API = "dirigent.dev/v1alpha1"


def _token_kubeconfig(kubectl: Kubectl, path: Path, namespace: str, account: str) -> Path:
    admin = yaml.safe_load(kubectl.kubeconfig.read_text())
    token = kubectl.run("create", "token", account, "-n", namespace, "--duration=1h").stdout.strip()
    admin["users"] = [{"name": account, "user": {"token": token}}]
    for ctx in admin["contexts"]:
        ctx["context"]["user"] = account
    path.write_text(yaml.safe_dump(admin))
    return path


def _allowed(kube_api: Any, user: str, verb: str, resource: str, subresource: str = "") -> bool:
    from kubernetes import client

    review = client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(
            user=user,
            resource_attributes=client.V1ResourceAttributes(
                namespace="team",
                verb=verb,
                group="dirigent.dev",
                resource=resource,
                subresource=subresource or None,
            ),
        )
    )
    result: Any = client.AuthorizationV1Api(kube_api).create_subject_access_review(review)
    return bool(result.status.allowed)


def test_the_operator_works_on_its_own_cluster_role(
    operator: Any, given: Given, kubectl: Kubectl, tmp_path: Path
) -> None:
    kubectl.run("create", "namespace", "dirigent-system", check=False)
    kubectl.run("apply", "-k", str(RBAC))
    config = _token_kubeconfig(
        kubectl, tmp_path / "sa.kubeconfig", "dirigent-system", "dirigent-operator"
    )
    for proc in operator.operators:
        operator.kill(proc)
    restricted = operator.start_operator(KUBECONFIG=str(config))
    try:
        given.objects(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "creds"},
                "stringData": {"token": "t"},
            }
        ).when.applied()
        then = (
            given.objects(
                {
                    "apiVersion": API,
                    "kind": "Connection",
                    "metadata": {"name": "c"},
                    "spec": {
                        "type": "http",
                        "settings": {"url": "https://example.invalid"},
                        "secrets": {"token": {"name": "creds", "key": "token"}},
                    },
                },
                {
                    "apiVersion": API,
                    "kind": "Pipeline",
                    "metadata": {"name": "p"},
                    "spec": {"steps": {"a": {"block": "core.noop"}}},
                },
                {
                    "apiVersion": API,
                    "kind": "Webhook",
                    "metadata": {"name": "w"},
                    "spec": {"pipeline": "p"},
                },
            )
            .when.applied()
            .then
        )
        then.of("Connection").condition("Ready", "True")
        then.of("Pipeline").condition("Ready", "True")
        then.of("Webhook").field("status.tokenSecret", equals="w-token")
        kubectl.run("delete", "pipeline", "p", "-n", given.namespace, "--timeout=30s")
        log = restricted.log.read_text(errors="replace")
        denied = [line for line in log.splitlines() if "is forbidden: User" in line]
        assert denied == [], denied
    finally:
        operator.kill(restricted)


def test_people_roles_aggregate_with_the_documented_verbs(kubectl: Kubectl, kube_api: Any) -> None:
    kubectl.run("create", "namespace", "dirigent-system", check=False)
    kubectl.run("apply", "-k", str(RBAC))
    kubectl.run("create", "namespace", "team", check=False)
    for role, user in (("view", "vera"), ("edit", "eddie"), ("admin", "ada")):
        kubectl.run(
            "create",
            "rolebinding",
            f"{user}-{role}",
            "-n",
            "team",
            f"--clusterrole={role}",
            f"--user={user}",
            check=False,
        )

    wait_until(
        lambda: _allowed(kube_api, "vera", "list", "pipelines"),
        what="aggregation into the view role",
        timeout=30,
    )
    assert _allowed(kube_api, "vera", "get", "runs")
    assert not _allowed(kube_api, "vera", "create", "pipelines", "run")
    assert not _allowed(kube_api, "vera", "create", "pipelines")
    assert _allowed(kube_api, "eddie", "create", "pipelines", "run")
    assert _allowed(kube_api, "eddie", "update", "runs", "cancel")
    assert _allowed(kube_api, "eddie", "create", "runs", "retry")
    assert _allowed(kube_api, "eddie", "delete", "pipelines")
    assert not _allowed(kube_api, "eddie", "deletecollection", "pipelines")
    assert _allowed(kube_api, "ada", "deletecollection", "pipelines")
    assert _allowed(kube_api, "ada", "update", "runs", "cancel")
