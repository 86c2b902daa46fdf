"""A Connection of kind kubernetes brings its own credentials and nothing that reaches into
the process opening it (the operator for its health check, a worker for docker.run).

What was tried: a kubeconfig whose user runs an ``exec`` plugin (a command in the operator),
one whose ``tokenFile`` names a file of the process (its content sent as a bearer token to a
server the tenant chose, and quoted in the check's message), ``inCluster`` (the process's
own ServiceAccount), ``kubeconfigPath`` (a file of the process), and nothing at all (the
process's default kubeconfig). Each is refused with the key named; the command never runs;
the server never sees the file's content.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from pydantic import SecretStr, ValidationError

from dirigent.blocks.kubernetes.connection import (
    ClusterAccess,
    KubernetesConnection,
    KubernetesConnectionKind,
)
from tests.integration.blocks.test_secrets_redacted import apply_connection
from tests.support.harness import Harness, harness
from tests.support.servers import Server

FILE_TOKEN = "token-of-the-process-3e9a"


@pytest.fixture
async def h(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Harness]:
    monkeypatch.setenv("DIRIGENT_SECRET_KEY", "0" * 64)
    async with harness(db_url, tmp_path / "artifacts") as found:
        yield found


def kubeconfig(server: str, user: dict[str, Any], **cluster: Any) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": server, **cluster}}],
            "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }
    )


@pytest.fixture
def api(server: Server) -> Server:
    async def version(request: web.Request) -> web.Response:
        return web.json_response({"gitVersion": "v1.33.0"})

    server.routes["/version/"] = version
    return server


def reaching(tmp_path: Path) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(the key refused, the user, the cluster) of each kubeconfig that reaches into us."""
    (tmp_path / "token").write_text(FILE_TOKEN)
    ran = tmp_path / "ran"
    command = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": "sh",
        "args": ["-c", f'touch {ran}; echo \'{{"status": {{"token": "x"}}}}\''],
    }
    return [
        ("exec", {"exec": command}, {}),
        ("tokenFile", {"tokenFile": str(tmp_path / "token")}, {}),
        ("auth-provider", {"auth-provider": {"name": "oidc", "config": {}}}, {}),
        ("client-certificate", {"client-certificate": "/etc/c.crt", "client-key": "/c.key"}, {}),
        ("certificate-authority", {"token": "t"}, {"certificate-authority": "/etc/ca.crt"}),
    ]


@pytest.mark.parametrize("index", range(5))
async def test_a_kubeconfig_that_reaches_into_the_process_is_refused_and_never_opened(
    h: Harness, api: Server, tmp_path: Path, index: int
) -> None:
    key, user, cluster = reaching(tmp_path)[index]
    text = kubeconfig(api.url, user, **cluster)
    with pytest.raises(ValidationError) as refused:
        KubernetesConnection(kubeconfig=SecretStr(text))
    assert f".{key} is not allowed in a Connection" in str(refused.value)
    # The operator's path: the Connection is stored, then checked with its kind.
    await apply_connection(h, "k8s", "kubernetes", {}, {"kubeconfig": text})
    health = await h.engine.connections.check(h.namespace, "k8s")
    assert health is not None and (health.ok, health.reason) == (False, "InvalidSettings")
    assert key in health.message
    assert not (tmp_path / "ran").exists()  # the exec plugin never ran
    assert api.seen == []  # nothing reached the tenant's server, with or without the token
    assert FILE_TOKEN not in health.message


@pytest.mark.parametrize(
    ("settings", "refused"),
    [
        ({"inCluster": True}, "inCluster"),  # the process's own ServiceAccount
        ({"kubeconfigPath": "/etc/kubernetes/admin.conf"}, "kubeconfigPath"),
        ({}, "brings its own credentials"),  # the process's default kubeconfig
    ],
)
def test_a_connection_may_not_borrow_the_processs_own_access(
    settings: dict[str, Any], refused: str
) -> None:
    with pytest.raises(ValidationError, match=refused):
        KubernetesConnection.model_validate(settings)


def test_the_processs_own_access_may_use_all_of_them() -> None:
    assert ClusterAccess.model_validate({"inCluster": True}).in_cluster
    assert ClusterAccess.model_validate({"kubeconfigPath": "/kc"}).kubeconfig_path == "/kc"
    assert ClusterAccess.model_validate({}).ways() == []


async def test_inline_credentials_reach_the_server(api: Server) -> None:
    text = kubeconfig(api.url, {"token": "inline-token"})
    report = await KubernetesConnectionKind().check(
        KubernetesConnection(kubeconfig=SecretStr(text))
    )
    assert report.ok, report
    [seen] = api.seen
    assert seen["headers"]["Authorization"] == "Bearer inline-token"
    assert "inline-token" not in (report.message or "")
