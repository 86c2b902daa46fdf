"""Tests of the harness itself: cluster choice, webhook cleanup, shell up/down.

Why: the harness decides where every other e2e test runs and what survives a crash; if its
cleanup or its process handling broke, later runs would fail for reasons no test names.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.harness.binaries import REPO_ROOT
from e2e.harness.cleanup import delete_dirigent_webhook_configurations
from e2e.harness.clusters import (
    KIND_CLUSTER_NAME,
    Cluster,
    choose_origin,
    docker_answers,
    provide_cluster,
)
from e2e.harness.processes import free_port
from e2e.kubectl import Kubectl
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

TRAP_LABEL = "dirigent.dev/e2e-webhook-trap"


def test_cluster_choice_follows_the_documented_order() -> None:
    env = {"DIRIGENT_E2E_KUBECONFIG": "/some/kubeconfig"}
    assert choose_origin(env, docker=lambda: True) == "existing"
    assert choose_origin({}, docker=lambda: True) == "kind"
    assert choose_origin({}, docker=lambda: False) == "local"
    assert choose_origin({"DIRIGENT_E2E_KUBECONFIG": ""}, docker=lambda: False) == "local"


def test_kind_branch_names_the_missing_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pytest-kind made unimportable (a None entry in sys.modules stops the import), so this
    # runs whether or not it is installed here.
    monkeypatch.setitem(sys.modules, "pytest_kind", None)
    cm = provide_cluster(tmp_path, {}, docker=lambda: True)
    with pytest.raises(RuntimeError, match=r"pytest-kind is not installed"):
        cm.__enter__()


def _why_docker_does_not_answer() -> str:
    """The first line of what `docker info` says (or why it could not be run)."""
    if shutil.which("docker") is None:
        return "no docker CLI on PATH"
    try:
        done = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"`docker info` could not run: {err}"
    lines = (done.stderr or done.stdout).strip().splitlines()
    return lines[0] if lines else f"`docker info` exited {done.returncode}"


def _nodes_ready(kubeconfig: Path) -> list[str]:
    nodes = Kubectl(kubeconfig).json("get", "nodes")["items"]
    return [
        n["metadata"]["name"]
        for n in nodes
        if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])
    ]


@pytest.mark.timeout(1200)  # a cold `kind create cluster` pulls its node image
def test_the_kind_branch_starts_a_cluster_where_a_docker_engine_answers(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Where Docker answers, the kind branch really runs: the session's own cluster when it
    came from kind, else one this test starts (and deletes) itself. Elsewhere it is not
    applicable, and its skip says so and why."""
    if not docker_answers():
        pytest.skip(
            "not applicable here: no Docker engine answers `docker info` "
            f"({_why_docker_does_not_answer()}), so the kind branch cannot start a cluster"
        )
    cluster: Cluster = request.getfixturevalue("cluster")
    if cluster.origin == "kind" or _current_context(cluster.kubeconfig) == KIND_CONTEXT:
        # The session runs on the kind branch (or on its cluster): check that one, and never
        # start a second copy of it under the same name (its end would delete the session's).
        assert _nodes_ready(cluster.kubeconfig), "the session's kind cluster has no Ready node"
        return
    with provide_cluster(tmp_path, {}, docker=lambda: True) as kind:
        assert kind.origin == "kind"
        ready = wait_until(
            lambda: _nodes_ready(kind.kubeconfig), timeout=300, every=2, what="a Ready kind node"
        )
        assert ready


KIND_CONTEXT = f"kind-{KIND_CLUSTER_NAME}"  # the context name kind writes for the cluster


def _current_context(kubeconfig: Path) -> str | None:
    context = yaml.safe_load(kubeconfig.read_text()).get("current-context")
    return str(context) if context else None


def _webhook_config(kind: str, name: str, port: int, namespace: str, policy: str) -> dict[str, Any]:
    hook: dict[str, Any] = {
        "name": "trap.dirigent.dev",
        # Nothing listens there: like the URL of an operator that was killed.
        "clientConfig": {"url": f"https://127.0.0.1:{port}/validate"},
        "rules": [
            {
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "operations": ["CREATE"],
                "resources": ["configmaps"],
            }
        ],
        "namespaceSelector": {"matchLabels": {TRAP_LABEL: namespace}},
        "failurePolicy": policy,
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 2,
    }
    if kind == "MutatingWebhookConfiguration":
        hook["reinvocationPolicy"] = "Never"
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [hook],
    }


@pytest.fixture
def leftover_webhooks(kubectl: Kubectl, namespace: str) -> Iterator[dict[str, str]]:
    """Two dirigent* configurations failing closed, one foreign one that must survive."""
    suffix = uuid.uuid4().hex[:6]
    port = free_port()
    names = {
        "validating": f"dirigent-leftover-{suffix}",
        "mutating": f"dirigent-leftover-mutating-{suffix}",
        "foreign": f"someone-else-{suffix}",
    }
    kubectl.run("label", "namespace", namespace, f"{TRAP_LABEL}={namespace}")
    docs = [
        _webhook_config(
            "ValidatingWebhookConfiguration", names["validating"], port, namespace, "Fail"
        ),
        _webhook_config("MutatingWebhookConfiguration", names["mutating"], port, namespace, "Fail"),
        _webhook_config(
            "ValidatingWebhookConfiguration", names["foreign"], port, namespace, "Ignore"
        ),
    ]
    kubectl.run(
        "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
    )
    try:
        yield names
    finally:
        for kind, name in (
            ("validatingwebhookconfiguration", names["validating"]),
            ("mutatingwebhookconfiguration", names["mutating"]),
            ("validatingwebhookconfiguration", names["foreign"]),
        ):
            kubectl.run("delete", kind, name, "--ignore-not-found", check=False)


def _create_configmap(kubectl: Kubectl, namespace: str, name: str) -> str:
    """Empty on success, else kubectl's error."""
    result = kubectl.run(
        "create", "configmap", name, "-n", namespace, "--from-literal=k=v", check=False
    )
    return "" if result.returncode == 0 else result.stderr


def test_leftover_dirigent_webhooks_are_removed(
    kubectl: Kubectl, kube_api: Any, namespace: str, leftover_webhooks: dict[str, str]
) -> None:
    # Given: a dead operator's webhook refuses requests it matches (this is why cleanup exists).
    def refusal() -> str:
        refused = _create_configmap(kubectl, namespace, "before-cleanup")
        if not refused:  # the apiserver may not have loaded the new configuration yet
            kubectl.run("delete", "configmap", "before-cleanup", "-n", namespace)
        return refused

    refused = wait_until(refusal, timeout=20, every=0.5, what="the leftover webhook refusing")
    assert "trap.dirigent.dev" in refused, refused

    # When: the harness cleans up.
    deleted = delete_dirigent_webhook_configurations(kube_api)

    # Then: exactly the dirigent* configurations are gone and requests pass again.
    assert f"ValidatingWebhookConfiguration/{leftover_webhooks['validating']}" in deleted
    assert f"MutatingWebhookConfiguration/{leftover_webhooks['mutating']}" in deleted
    assert not any(leftover_webhooks["foreign"] in d for d in deleted)
    kubectl.run("get", "validatingwebhookconfiguration", leftover_webhooks["foreign"])
    wait_until(
        lambda: _create_configmap(kubectl, namespace, "after-cleanup"),
        lambda refused: not refused,
        timeout=20,
        every=0.5,
        what="a configmap created once the webhooks are gone (the last value: the refusal)",
    )


def _pids_alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        except FileNotFoundError:
            continue
        if state not in ("Z", "X"):
            alive.append(pid)
    return alive


def test_shell_up_and_down_leave_no_process(cluster: Cluster, tmp_path: Path) -> None:
    if cluster.origin != "local":
        pytest.skip("the shell control plane is the local branch; this run uses " + cluster.origin)
    workdir = tmp_path / "shell-cluster"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    cli = [sys.executable, "-m", "e2e.harness"]
    up = subprocess.run(
        [*cli, "up", "--workdir", str(workdir), "--nodes", "1"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=240,
        check=False,
    )
    state_path = workdir / "state.json"
    pids = (
        [p["pid"] for p in json.loads(state_path.read_text())["processes"]]
        if state_path.exists()
        else []
    )
    try:
        assert up.returncode == 0, up.stderr
        kubeconfig = Path(up.stdout.strip())
        assert kubeconfig.is_file()
        assert len(_pids_alive(pids)) == 5, "etcd, apiserver, controller-manager, scheduler, kwok"
        # The plane outlived the command that started it and answers with a real version.
        version = json.loads(Kubectl(kubeconfig).run("version", "-o", "json").stdout)
        assert version["serverVersion"]["gitVersion"].startswith("v1.")
        assert "master" not in version["serverVersion"]["gitVersion"]
    finally:
        down = subprocess.run(
            [*cli, "down", "--workdir", str(workdir)],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO_ROOT,
            timeout=120,
            check=False,
        )
    assert down.returncode == 0, down.stderr
    assert _pids_alive(pids) == []
    assert not state_path.exists()
