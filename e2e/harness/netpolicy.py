"""NetworkPolicy enforcement on the real node: kube-network-policies as a DaemonSet pod.

Why: a NetworkPolicy is only an object until an agent enforces it. kube-network-policies
(the small agent kind uses; built by hack/k8s/build-net.sh) sends the first packet of each
connection of a pod selected by a policy to user space through an NFQUEUE and answers
accept or drop. It reads its credentials the in-cluster way only (a service account token
at a fixed path), so it runs as kind runs it: a privileged pod on the host network, in
``kube-system``, from a scratch image holding only its static binary (no registry here).

Departures from upstream's install.yaml, each for this shared host: metrics on 127.0.0.1
instead of every interface; NRI off (Debian's containerd 1.6 has none, and the agent then
reads pod IPs from the API); the API server at 127.0.0.1 (it listens nowhere else).
Everything it programs lives in the table ``inet kube-network-policies``, which the node's
teardown removes (``podnet.OWNED_TABLES``): its SIGTERM path does not clean up.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from e2e.harness import images

NAME = "kube-network-policies"
NAMESPACE = "kube-system"
NFT_TABLE = ("inet", NAME)
QUEUE_ID = 98  # upstream install.yaml's choice


def image_name(version: str) -> str:
    return f"localhost/dirigent/{NAME}:{version}"


def agent_archive(bin_dir: Path, version: str) -> images.ImageArchive:
    """The agent's image (its binary alone), built once per binary."""
    return images.static_binary_archive(image_name(version), bin_dir / NAME, [f"/{NAME}"])


def manifests(
    image: str, node_label: str, api_port: int, metrics_port: int
) -> list[dict[str, Any]]:
    """ServiceAccount, RBAC and the DaemonSet (only on the real node, by its label)."""
    meta = {"name": NAME, "namespace": NAMESPACE}
    rules = [
        {"apiGroups": [""], "resources": ["pods", "namespaces"], "verbs": ["list", "watch"]},
        {
            "apiGroups": ["networking.k8s.io"],
            "resources": ["networkpolicies"],
            "verbs": ["list", "watch"],
        },
    ]
    args = [
        "--hostname-override=$(NODE_NAME)",
        f"--nfqueue-id={QUEUE_ID}",
        f"--metrics-bind-address=127.0.0.1:{metrics_port}",
        "--disable-nri",
        "--v=2",
    ]
    env = [
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
        {"name": "KUBERNETES_SERVICE_PORT", "value": str(api_port)},
    ]
    container = {
        "name": NAME,
        "image": image,
        "imagePullPolicy": "Never",
        "args": args,
        "env": env,
        "securityContext": {"privileged": True, "capabilities": {"add": ["NET_ADMIN"]}},
        "resources": {"requests": {"cpu": "10m", "memory": "30Mi"}},
    }
    labels = {"app": NAME}
    pod_spec = {
        "hostNetwork": True,
        "serviceAccountName": NAME,
        "priorityClassName": "system-node-critical",
        "nodeSelector": {node_label: "true"},
        "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}],
        "terminationGracePeriodSeconds": 5,
        "containers": [container],
    }
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": NAME},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": NAME},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": NAME,
            },
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}],
        },
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {**meta, "labels": labels},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": pod_spec},
            },
        },
    ]


def _kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    kubectl = os.environ.get("DIRIGENT_KUBECTL", "kubectl")
    result = subprocess.run(
        [kubectl, f"--kubeconfig={kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout


def deploy(kubeconfig: Path, docs: list[dict[str, Any]]) -> None:
    _kubectl(kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump_all(docs))


def agent_ready(kubeconfig: Path) -> bool:
    """The DaemonSet's pod on the real node is Ready (its container runs)."""
    out = _kubectl(
        kubeconfig, "get", "daemonset", NAME, "-n", NAMESPACE,
        "-o", "jsonpath={.status.numberReady}",
    )  # fmt: skip
    return out.strip() == "1"
