"""The Helm chart installed for real on the real node: dirigent's pods as real containers.

Why: the chart's Deployments only ever "ran" on kwok; here the project image (``make
image``) is imported into the real node's containerd and ``helm install`` starts the
operator, the API and a worker as real processes whose probes decide Ready. The e2e test
and ``make demo-up REAL_NODE=1`` share this module.

What this harness decides (``values``), as an operator of such a cluster would:
- every pod on the real node (node selector + toleration) on the host network, with its
  own ports (one host: a metrics port per component, the API's port, the webhook's port);
- in-cluster clients reach the API server on 127.0.0.1 (``KUBERNETES_SERVICE_HOST``): there
  is no kube-proxy, so the ``kubernetes`` Service's cluster IP answers nothing;
- the database is an embedded PostgreSQL on the host's loopback, named in a Secret;
- ``docker.run`` through the unsafe gate, its Jobs placed on the real node as well
  (``DIRIGENT_KUBE_POD_DEFAULTS``); the admission webhook off (the API server would dial
  the pod's host address, not loopback).
"""

from __future__ import annotations

import base64
import json
import secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml

from e2e.harness.binaries import REPO_ROOT
from e2e.harness.images import cache_root
from e2e.harness.processes import free_port
from e2e.harness.realnode import LABEL, RealNode, placement

__all__ = [
    "COMPONENTS",
    "CRDS",
    "LABEL",
    "Ports",
    "admin_token",
    "adopt_crds",
    "build_project_image",
    "load_project_image",
    "new_secret_key",
    "secrets_manifest",
    "values",
]

COMPONENTS = ("operator", "api", "worker")
DATABASE_SECRET = "dirigent-database"
KEY_SECRET = "dirigent-secret-key"
IMAGE_BUILD_TIMEOUT = 1800  # a cold build makes the Debian base first


def build_project_image() -> str:
    """``make image`` (podman); returns the image reference it printed last."""
    result = subprocess.run(
        ["make", "-s", "image"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=IMAGE_BUILD_TIMEOUT,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"make image failed:\n{result.stderr[-4000:]}")
    return result.stdout.strip().splitlines()[-1]


def _podman_env() -> dict[str, str]:
    """What hack/image/podman-env.sh sets up (the store ``make image`` wrote to)."""
    script = f"source {REPO_ROOT}/hack/image/podman-env.sh && env -0"
    out = subprocess.run(["bash", "-c", script], capture_output=True, check=True).stdout
    return dict(line.split("=", 1) for line in out.decode().split("\0") if "=" in line)


def load_project_image(node: RealNode, image: str) -> Path:
    """Save ``image`` from podman's store and import it into the node's containerd."""
    archive = cache_root() / "images" / "project.tar"
    archive.parent.mkdir(parents=True, exist_ok=True)
    archive.unlink(missing_ok=True)
    subprocess.run(
        ["podman", "save", "--format", "docker-archive", "-o", str(archive), image],
        env=_podman_env(),
        capture_output=True,
        check=True,
        timeout=600,
    )
    node.load_image(archive)
    return archive


def _env(**pairs: str) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in pairs.items()]


@dataclass
class Ports:
    """Host ports of one release (every pod shares the host's network)."""

    api: int = field(default_factory=free_port)
    metrics: dict[str, int] = field(default_factory=lambda: {c: free_port() for c in COMPONENTS})


def values(image: str, kubeconfig: Path, ports: Ports, **settings: Any) -> dict[str, Any]:
    """Helm values that run the chart on the real node of this harness."""
    repository, tag = image.rsplit(":", 1)
    server = urlparse(_server(kubeconfig))
    in_cluster = _env(
        KUBERNETES_SERVICE_HOST=server.hostname or "127.0.0.1",
        KUBERNETES_SERVICE_PORT=str(server.port or 443),
    )
    where = placement()
    pod = {"nodeSelector": where["nodeSelector"], "tolerations": where["tolerations"]}
    pod_defaults = json.dumps(where, separators=(",", ":"))
    return {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "hostNetwork": True,
        "database": {"existingSecret": DATABASE_SECRET},
        "secretKey": {"existingSecret": KEY_SECRET},
        "settings": {"enabledUnsafeBlocks": ["docker.run"], "logFormat": "json", **settings},
        "operator": {
            **pod,
            "replicas": 1,
            "metricsPort": ports.metrics["operator"],
            "admission": {"enabled": False},
            "extraEnv": in_cluster,
        },
        "api": {
            **pod,
            "replicas": 1,
            "port": ports.api,
            "metricsPort": ports.metrics["api"],
            "extraEnv": in_cluster,
        },
        "worker": {
            **pod,
            "replicas": 1,
            "metricsPort": ports.metrics["worker"],
            "extraEnv": [*in_cluster, *_env(DIRIGENT_KUBE_POD_DEFAULTS=pod_defaults)],
        },
        "migrations": {**pod, "extraEnv": in_cluster},
        # `helm test`: no cluster DNS here, so the hook asks the API on the host's loopback.
        "tests": {**pod, "apiUrl": f"http://127.0.0.1:{ports.api}"},
    }


def _server(kubeconfig: Path) -> str:
    config = yaml.safe_load(kubeconfig.read_text())
    server: str = config["clusters"][0]["cluster"]["server"]
    return server


def new_secret_key() -> str:
    return base64.b64encode(secrets.token_bytes(32)).decode()


def secrets_manifest(namespace: str, database_url: str, key: str) -> str:
    """The two Secrets the chart requires: the database URL and the sealing key."""
    docs = [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace},
            "stringData": data,
        }
        for name, data in (
            (DATABASE_SECRET, {"url": database_url}),
            (KEY_SECRET, {"secret-key": key}),
        )
    ]
    return yaml.safe_dump_all(docs)


CRDS = [f"{p}.dirigent.dev" for p in ("pipelines", "schedules", "webhooks", "connections")]


def adopt_crds(kubectl: Any, release: str, namespace: str) -> None:
    """Let ``release`` take over CRDs an earlier release or ``kubectl apply`` left (what
    docs/upgrade.md tells a person to do when the CRDs exist before ``helm install``)."""
    for crd in CRDS:
        if kubectl.run("get", "crd", crd, check=False).returncode != 0:
            continue
        kubectl.run("label", "crd", crd, "--overwrite", "app.kubernetes.io/managed-by=Helm")
        kubectl.run(
            "annotate", "crd", crd, "--overwrite",
            f"meta.helm.sh/release-name={release}", f"meta.helm.sh/release-namespace={namespace}",
        )  # fmt: skip


def admin_token(kubectl: Any, namespace: str, name: str = "dirigent-demo") -> str:
    """A bearer token the API's cluster auth accepts: a ServiceAccount bound to cluster-admin."""
    kubectl.run("create", "serviceaccount", name, "-n", namespace)
    kubectl.run(
        "create", "clusterrolebinding", f"{namespace}-{name}", "--clusterrole=cluster-admin",
        f"--serviceaccount={namespace}:{name}",
    )  # fmt: skip
    # The API accepts tokens minted for its audience only (DIRIGENT_API_TOKEN_AUDIENCES).
    token: str = kubectl.run(
        "create", "token", name, "-n", namespace, "--duration=24h", "--audience=dirigent"
    ).stdout
    return token.strip()
