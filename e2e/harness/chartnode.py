"""The Helm chart installed for real on the real node: dirigent's pods as real containers.

Why: the chart's Deployments only ever "ran" on kwok; here the project image (``make
image``) is imported into the real node's containerd and ``helm install`` starts the
operator, the API and a worker as real processes whose probes decide Ready. The e2e test
and ``make demo-up REAL_NODE=1`` share this module.

What this harness decides (``values``), as an operator of such a cluster would:
- every pod on the real node (node selector + toleration), on the node's pod network with
  the chart's own ports (replicas co-exist; no host port is taken); in-cluster clients use
  the ``kubernetes`` Service as everywhere;
- the database is an embedded PostgreSQL on the host's loopback, which the node opens to
  its pods at its gateway address (``pod_database_url``), named in a Secret;
- there is no cluster DNS, so the ``helm test`` hook finds the API Service through the
  variables the kubelet sets for it (``$(<NAME>_SERVICE_HOST)``), and the host reaches the
  API at the Service's cluster IP (``api_url``);
- ``docker.run`` through the unsafe gate, its Jobs placed on the real node as well
  (``DIRIGENT_KUBE_POD_DEFAULTS``); the admission webhook off (not exercised here).
"""

from __future__ import annotations

import base64
import json
import secrets
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml

from e2e.harness.binaries import REPO_ROOT
from e2e.harness.images import cache_root
from e2e.harness.realnode import LABEL, RealNode, placement

__all__ = [
    "COMPONENTS",
    "CRDS",
    "LABEL",
    "admin_token",
    "adopt_crds",
    "api_url",
    "build_project_image",
    "fullname",
    "load_project_image",
    "new_secret_key",
    "pod_database_url",
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


def fullname(release: str) -> str:
    """The chart's ``dirigent.fullname`` for ``release`` (no overrides)."""
    return release if "dirigent" in release else f"{release}-dirigent"


def values(image: str, release: str, **settings: Any) -> dict[str, Any]:
    """Helm values that run the chart of ``release`` on the real node of this harness."""
    repository, tag = image.rsplit(":", 1)
    where = placement()
    pod = {"nodeSelector": where["nodeSelector"], "tolerations": where["tolerations"]}
    pod_defaults = json.dumps(where, separators=(",", ":"))
    # The kubelet expands $(VAR) in a command from the container's variables, the
    # Service links included: the hook reaches the API Service without cluster DNS.
    service = fullname(release).upper().replace("-", "_") + "_API_SERVICE"
    return {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "database": {"existingSecret": DATABASE_SECRET},
        "secretKey": {"existingSecret": KEY_SECRET},
        "settings": {"enabledUnsafeBlocks": ["docker.run"], "logFormat": "json", **settings},
        "operator": {**pod, "replicas": 1, "admission": {"enabled": False}},
        "api": {**pod, "replicas": 1},
        "worker": {
            **pod,
            "replicas": 1,
            "extraEnv": _env(DIRIGENT_KUBE_POD_DEFAULTS=pod_defaults),
        },
        "migrations": pod,
        "tests": {**pod, "apiUrl": f"http://$({service}_HOST):$({service}_PORT)"},
    }


def pod_database_url(node: RealNode, url: str) -> str:
    """``url`` (a server on the host's loopback) as the node's pods reach it."""
    parts = urlsplit(url)
    if parts.port is None:
        raise ValueError(f"the database URL names no port: {parts.hostname}")
    gateway = node.expose_host_port(parts.port)
    netloc = parts.netloc.replace(f"{parts.hostname}:{parts.port}", f"{gateway}:{parts.port}")
    return urlunsplit(parts._replace(netloc=netloc))


def api_url(kubectl: Any, namespace: str, release: str) -> str:
    """The API Service's cluster IP and port (this host routes them to the node's pods)."""
    svc = kubectl.json("get", "service", f"{fullname(release)}-api", "-n", namespace)
    return f"http://{svc['spec']['clusterIP']}:{svc['spec']['ports'][0]['port']}"


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
