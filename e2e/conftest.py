"""Fixtures for the e2e suite: one cluster per session, a fresh namespace per test.

Why: starting a control plane costs seconds, a namespace costs milliseconds; tests share
the first and never each other's objects. The cluster comes from harness.clusters (an
existing cluster, kind, or the local control plane, in that order). Leftover dirigent
admission webhooks are removed before and after the session, so a killed operator from an
earlier run cannot refuse this run's requests.

`make e2e` runs two pytest-xdist workers (``--dist loadgroup``). Each worker is a session of
its own: its own control plane, dirigent system and namespaces. What exists once per machine
is not: the real node (a lock in its home) and podman's image store (``make image``, the
node's images). Tests touching those form one group, run by one worker one after another;
every other module is a group of its own, so a module-scoped fixture (a helm install, a
Prometheus stack) is set up once, not once per worker.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.gwt import Given
from e2e.harness.binaries import ensure_binaries
from e2e.harness.cleanup import delete_dirigent_webhook_configurations
from e2e.harness.clusters import Cluster, choose_origin, provide_cluster
from e2e.harness.hoststate import read_kernel_settings
from e2e.harness.processes import wait_until
from e2e.harness.realnode import RealNode, prepare_real_node
from e2e.harness.s3 import ensure_weed, uses_s3
from e2e.harness.s3 import s3_server as s3_server  # the real S3 server, a session fixture
from e2e.kubectl import Kubectl

MACHINE_GROUP = "machine"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "machine: uses what exists once per machine (the real node, podman's image store); "
        "under pytest-xdist these tests run on one worker, one after another",
    )


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the test ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        machine = item.get_closest_marker("machine") or "real_node" in getattr(
            item, "fixturenames", ()
        )
        group = MACHINE_GROUP if machine else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))


def pytest_collection_finish(session: pytest.Session) -> None:
    # Build binaries here, outside any test's timeout: a cold build takes many minutes.
    if any(item.get_closest_marker("e2e") for item in session.items) and (
        choose_origin(os.environ) == "local"
    ):
        ensure_binaries()
        # The same for the real node's packages and images (a cold base image: minutes).
        if any("real_node" in getattr(item, "fixturenames", ()) for item in session.items):
            prepare_real_node()
    if uses_s3(session):
        ensure_weed()  # the S3 server's binary (a cold build: minutes)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with provide_cluster(tmp_path_factory.mktemp("cluster"), os.environ) as c:
        api = c.api_client()
        try:
            delete_dirigent_webhook_configurations(api)
            yield c
            delete_dirigent_webhook_configurations(api)
        finally:
            api.close()


@pytest.fixture
def kube_api(cluster: Cluster) -> Iterator[Any]:
    """A ``kubernetes.client.ApiClient`` with the cluster's admin credentials."""
    api = cluster.api_client()
    try:
        yield api
    finally:
        api.close()


@pytest.fixture(scope="session")
def kubectl(cluster: Cluster) -> Kubectl:
    return Kubectl(cluster.kubeconfig)


@pytest.fixture
def namespace(kubectl: Kubectl, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace, deleted (without waiting) after the test."""
    stem = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"e2e-{stem}-{uuid.uuid4().hex[:6]}"
    kubectl.run("create", "namespace", name)

    def has_default_sa() -> bool:
        # Pods are refused until the service-account controller has made "default".
        return (
            kubectl.run("get", "serviceaccount", "default", "-n", name, check=False).returncode == 0
        )

    wait_until(has_default_sa, what=f"service account default in {name}", timeout=30)
    try:
        yield name
    finally:
        kubectl.run("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def given(kubectl: Kubectl, namespace: str) -> Given:
    return Given(kubectl, namespace)


# --- dirigent's own processes ---------------------------------------------------------------


@pytest.fixture(scope="session")
def system(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """An embedded PostgreSQL, a worker and one operator against the session's cluster."""
    from e2e.harness.system import System

    with System(cluster.kubeconfig, tmp_path_factory.mktemp("dirigent")) as s:
        yield s
    api = cluster.api_client()
    try:
        delete_dirigent_webhook_configurations(api)
    finally:
        api.close()


@pytest.fixture
def operator(system: Any) -> Any:
    """The system with one live, leading operator (restarted if a test killed the last one)."""
    live = [p for p in system.operators if p.running()]
    if not live:
        system.start_operator()
    return system


@pytest.fixture
def engine_client(system: Any) -> Any:
    from e2e.engine import EngineClient

    return EngineClient(system.database_url, system.secret_key)


@pytest.fixture(scope="session")
def real_node(cluster: Cluster) -> Iterator[RealNode]:
    """A real node (containerd + kubelet) joined to the session's cluster; opt-in.

    Requesting it starts the node once for the whole session. Pods reach it only with
    ``e2e.harness.realnode.placement()`` merged into their spec (label, toleration) and
    images from ``e2e.harness.images`` with ``imagePullPolicy: Never``; each gets its own
    address on the node's pod network (Services and NetworkPolicies work).
    """
    if cluster.pki_dir is None:
        pytest.fail(
            f"the real node joins only the local control plane (this cluster is "
            f"{cluster.origin!r}); unset DIRIGENT_E2E_KUBECONFIG to run the real-node tests"
        )
    before = read_kernel_settings()
    node = RealNode(ensure_binaries(), cluster.kubeconfig, cluster.pki_dir)
    with node:
        yield node
    # A node that leaks mounts, cgroups, processes or kernel settings fails the session.
    left = node.leftovers(before)
    assert not left, f"the real node left these behind after stopping: {left}"
