"""The REST API authenticates with the cluster and authorises by its RBAC.

Given a real API server, the ClusterRoles of config/rbac and a ``dirigent api
--auth cluster`` process (its own credentials: the cluster's admin kubeconfig, standing in
for a service account bound to dirigent-api): a service account bound to the viewer
role lists but may not run; one bound to the editor role applies and runs; one with no role
gets a 403 Problem; a token the cluster does not know gets a 401 Problem.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from dirigent.engine import EmbeddedPostgres
from e2e.harness.binaries import REPO_ROOT
from e2e.harness.clusters import Cluster
from e2e.kubectl import Kubectl
from tests.support.postgres import migrated_database, run_blocking
from tests.support.servers import free_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

ROLES = REPO_ROOT / "config" / "rbac"
PIPELINE = {
    "apiVersion": "dirigent.dev/v1alpha1",
    "kind": "Pipeline",
    "metadata": {"name": "hello"},
    "spec": {"steps": {"first": {"block": "core.noop"}}},
}


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    base = Path(tempfile.mkdtemp(prefix="dirigent-e2e-api-pg-"))
    with EmbeddedPostgres(base / "data") as server:
        yield run_blocking(lambda: migrated_database(server, "dirigent"))


@pytest.fixture(scope="module")
def api_url(cluster: Cluster, kubectl: Kubectl, database: str) -> Iterator[str]:
    kubectl.run("create", "namespace", "dirigent-system", check=False)  # the operator's
    kubectl.run("apply", "-k", str(ROLES))
    port = free_port()
    env = {**os.environ, "DIRIGENT_DATABASE_URL": database, "DIRIGENT_METRICS_PORT": "0"}
    command = [sys.executable, "-m", "dirigent.cli", "api", "--auth", "cluster"]
    command += ["--kubeconfig", str(cluster.kubeconfig), "--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:

        def ready() -> bool:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            return _ready(url)

        wait_until(ready, timeout=60, every=0.05, what="dirigent api ready")
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


AUDIENCE = "dirigent"  # DIRIGENT_API_TOKEN_AUDIENCES' default


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health/ready", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def account(kubectl: Kubectl, namespace: str, name: str, role: str | None) -> dict[str, str]:
    """A service account (bound to ``role`` in the namespace, if any) and its bearer header."""
    kubectl.run("create", "serviceaccount", name, "-n", namespace)
    if role is not None:
        kubectl.run(
            "create", "rolebinding", f"{name}-{role}", "-n", namespace,
            f"--clusterrole={role}", f"--serviceaccount={namespace}:{name}",
        )  # fmt: skip
    token = kubectl.run(
        "create", "token", name, "-n", namespace, "--audience", AUDIENCE
    ).stdout.strip()
    return {"Authorization": f"Bearer {token}"}


def assert_problem(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == code


def test_viewer_lists_but_cannot_run_editor_runs_nobody_is_forbidden(
    api_url: str, kubectl: Kubectl, namespace: str
) -> None:
    # Given three service accounts: an editor, a viewer and one without any role
    editor = account(kubectl, namespace, "editor", "dirigent-editor")
    kubectl.run(
        "create", "rolebinding", "editor-view", "-n", namespace,
        "--clusterrole=dirigent-viewer", f"--serviceaccount={namespace}:editor",
    )  # fmt: skip
    viewer = account(kubectl, namespace, "viewer", "dirigent-viewer")
    nobody = account(kubectl, namespace, "nobody", None)
    base = f"{api_url}/api/v1/namespaces/{namespace}"
    with httpx.Client(base_url=base, timeout=30) as http:
        # When the editor applies and runs a pipeline
        applied = http.post("/pipelines/$apply", json=PIPELINE, headers=editor)
        assert applied.status_code == 200, applied.text
        ran = http.post("/pipelines/hello/$run", json={}, headers=editor)
        assert ran.status_code == 201, ran.text

        # Then the viewer lists pipelines and runs, but may not run or apply
        listed = http.get("/pipelines", headers=viewer)
        assert listed.status_code == 200 and [p["name"] for p in listed.json()["items"]] == [
            "hello"
        ]
        assert http.get("/runs", headers=viewer).status_code == 200
        refused = http.post("/pipelines/hello/$run", json={}, headers=viewer)
        assert_problem(refused, 403, "auth.forbidden")
        assert refused.json()["params"] == {"verb": "create", "resource": "pipelines/run"}
        assert_problem(
            http.post("/pipelines/$apply", json=PIPELINE, headers=viewer), 403, "auth.forbidden"
        )

        # And a service account with no role gets a 403, an unknown token a 401
        assert_problem(http.get("/pipelines", headers=nobody), 403, "auth.forbidden")
        bad = {"Authorization": "Bearer not-a-token-the-cluster-issued"}
        assert_problem(http.get("/pipelines", headers=bad), 401, "auth.unauthenticated")
        # A real token of the editor's, minted for the cluster's own audience (full power
        # against the Kubernetes API), is not accepted here: only `--audience dirigent`.
        general = kubectl.run("create", "token", "editor", "-n", namespace).stdout.strip()
        wrong = {"Authorization": f"Bearer {general}"}
        assert_problem(http.get("/pipelines", headers=wrong), 401, "auth.unauthenticated")
        assert_problem(http.get("/pipelines"), 401, "auth.unauthenticated")

        # And the viewer's grant is namespaced: another namespace is forbidden to it
        other = http.get(f"{api_url}/api/v1/namespaces/default/pipelines", headers=viewer)
        assert_problem(other, 403, "auth.forbidden")


def test_the_roles_aggregate_into_the_built_in_view_role(
    api_url: str, kubectl: Kubectl, namespace: str
) -> None:
    # Given a service account bound only to Kubernetes' own `view` role
    viewer = account(kubectl, namespace, "plain-viewer", "view")
    base = f"{api_url}/api/v1/namespaces/{namespace}"
    with httpx.Client(base_url=base, timeout=30) as http:
        # Then it may list through the API (aggregation is asynchronous: wait for it)

        def listed() -> tuple[int, str]:
            answer = http.get("/pipelines", headers=viewer)
            return answer.status_code, answer.text

        wait_until(
            listed,
            lambda answer: answer[0] == 200,
            timeout=30,
            every=0.2,
            what="the viewer listing pipelines (the aggregated role in force)",
        )
        assert_problem(
            http.post("/pipelines/hello/$run", json={}, headers=viewer), 403, "auth.forbidden"
        )


def test_apply_needs_the_right_on_the_kind_it_writes(
    api_url: str, kubectl: Kubectl, namespace: str
) -> None:
    # Given an account that may apply through the API and create Pipelines, but not Connections
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "pipelines-only", "namespace": namespace},
        "rules": [
            {
                "apiGroups": ["dirigent.dev"],
                "resources": ["pipelines", "pipelines/apply"],
                "verbs": ["create"],
            }
        ],
    }
    kubectl.run("apply", "-f", "-", stdin=json.dumps(role))
    kubectl.run("create", "serviceaccount", "pipeliner", "-n", namespace)
    kubectl.run(
        "create", "rolebinding", "pipeliner", "-n", namespace,
        "--role=pipelines-only", f"--serviceaccount={namespace}:pipeliner",
    )  # fmt: skip
    token = kubectl.run(
        "create", "token", "pipeliner", "-n", namespace, "--audience", AUDIENCE
    ).stdout.strip()
    pipeliner = {"Authorization": f"Bearer {token}"}
    connection = {
        "apiVersion": "dirigent.dev/v1alpha1",
        "kind": "Connection",
        "metadata": {"name": "api"},
        "spec": {"type": "http", "settings": {"url": "http://example.invalid"}},
    }
    base = f"{api_url}/api/v1/namespaces/{namespace}"
    with httpx.Client(base_url=base, timeout=30) as http:
        # When it applies a Pipeline, then a Connection (also as a dry run)
        applied = http.post("/pipelines/$apply", json=PIPELINE, headers=pipeliner)
        refused = http.post("/pipelines/$apply", json=connection, headers=pipeliner)
        planned = http.post(
            "/pipelines/$apply", params={"dry_run": "true"}, json=connection, headers=pipeliner
        )

    # Then the Pipeline is applied and the Connection refused, naming the missing right
    assert applied.status_code == 200, applied.text
    for answer in (refused, planned):
        assert_problem(answer, 403, "auth.forbidden")
        assert answer.json()["params"] == {"verb": "create", "resource": "connections"}
