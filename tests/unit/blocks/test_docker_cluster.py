"""docker.run's ``cluster``: a declared connection field of kind kubernetes, and the ways a
kubernetes connection reaches its API server."""

from __future__ import annotations

import base64

import pytest
from pydantic import ValidationError

from dirigent.blocks.connections import KubernetesConnection
from dirigent.blocks.kubernetes.docker import DockerRunOperator, KubeSettings
from dirigent.blocks.plugin import plugin
from dirigent.engine import build_catalog, check_against_catalog
from dirigent.engine.shapes.manifests.loading import parse_manifest, read_text
from dirigent.engine.shapes.manifests.pipeline import Pipeline

CATALOG = build_catalog([("dirigent-blocks", plugin.contribute())])
PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def pipeline(config: str) -> Pipeline:
    docs, _ = read_text(
        "apiVersion: dirigent.dev/v1alpha1\nkind: Pipeline\nmetadata: {name: p}\n"
        f"spec:\n  steps:\n    job: {{block: docker.run, config: {config}}}\n"
    )
    manifest, problems = parse_manifest(docs[0].data)
    assert isinstance(manifest, Pipeline), problems
    return manifest


def problems(config: str, connections: dict[str, str]) -> list[tuple[str, str]]:
    found = check_against_catalog(
        pipeline(config), CATALOG, connections=connections, enabled_unsafe={"docker.run"}
    )
    return [(p.code, p.location) for p in found]


def test_docker_run_declares_its_cluster_field_as_kubernetes_only() -> None:
    fields = {f.field: f.kinds for f in DockerRunOperator.spec.connection_fields}
    assert fields == {"connection": (), "cluster": ("kubernetes",)}


def test_apply_accepts_a_kubernetes_cluster_and_refuses_another_kind_or_none() -> None:
    ok = "{image: busybox, cluster: prod}"
    assert problems(ok, {"prod": "kubernetes"}) == []
    assert problems(ok, {"prod": "http"}) == [
        ("pipeline.connection.kind", "spec.steps.job.config.cluster")
    ]
    assert problems(ok, {}) == [("pipeline.connection.unknown", "spec.steps.job.config.cluster")]


def test_envs_connection_may_be_of_any_kind() -> None:
    config = "{image: busybox, connection: api, envFromConnection: {URL: url}}"
    assert problems(config, {"api": "http"}) == []


def test_a_server_and_token_become_a_kubeconfig_with_the_ca() -> None:
    conn = KubernetesConnection.model_validate(
        {"server": "https://k:6443", "token": "t0k", "certificateAuthority": PEM}
    )
    data = conn.kubeconfig_dict()
    assert data is not None
    [cluster] = data["clusters"]
    assert cluster["cluster"]["server"] == "https://k:6443"
    assert base64.b64decode(cluster["cluster"]["certificate-authority-data"]).decode() == PEM
    assert data["users"][0]["user"] == {"token": "t0k"}
    assert "t0k" not in repr(conn)  # the token stays a secret until it is used


@pytest.mark.parametrize(
    "settings",
    [
        {"server": "https://k:6443"},  # a server with no token
        {"token": "t"},  # a token with no server
        {"inCluster": True, "kubeconfigPath": "/kc"},
        {"kubeconfig": "apiVersion: v1", "server": "https://k", "token": "t"},
    ],
)
def test_one_way_to_the_cluster_or_the_connection_is_refused(settings: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        KubernetesConnection.model_validate(settings)


def test_a_changed_credential_is_a_different_client() -> None:
    one = KubernetesConnection.model_validate({"server": "https://k", "token": "a"})
    same = KubernetesConnection.model_validate({"server": "https://k", "token": "a"})
    other = KubernetesConnection.model_validate({"server": "https://k", "token": "b"})
    assert one.identity() == same.identity() != other.identity()


def test_in_cluster_ignores_a_kubeconfig_in_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KUBECONFIG", "/somewhere")
    monkeypatch.setenv("DIRIGENT_KUBE_IN_CLUSTER", "true")
    conn = KubeSettings().connection()
    assert conn.in_cluster and conn.kubeconfig_path is None
