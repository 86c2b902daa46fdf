"""Pod networking on the real node: own addresses, Services, NetworkPolicies, for real.

Why: with host networking a second replica of a Deployment stays Pending (its port is
taken) and a NetworkPolicy is only an object. These tests prove what the node's CNI
(bridge + host-local), kube-proxy and kube-network-policies do: two replicas serving the
same containerPort run side by side on their own addresses; a ClusterIP Service reaches
both from a pod and from the host; a default-deny-egress policy makes a pod's connections
to another pod and to the Service fail, a policy allowing that egress opens them again,
and deleting the policies restores access. Every request is made by a real process in a
pod (``kubectl exec``), and the answer names the pod that served it.
"""

from __future__ import annotations

import ipaddress
import json
import urllib.request
from typing import Any

import pytest

from e2e.gwt import Given
from e2e.harness import podnet
from e2e.harness.images import BASE_IMAGE
from e2e.harness.processes import wait_until
from e2e.harness.realnode import RealNode, placement
from e2e.kubectl import Kubectl

pytestmark = pytest.mark.e2e

PORT = 8080
# Answers every GET with the pod's name: which replica served a request is visible.
SERVER = f"""
import http.server, socket
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(socket.gethostname().encode())
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("", {PORT}), Handler).serve_forever()
"""
# Run in a pod by `kubectl exec`: fetches each URL once, prints a JSON list of the bodies,
# or "error: ..." for a URL that did not answer within 2 s.
FETCH = """
import json, sys, urllib.request
out = []
for url in sys.argv[1:]:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            out.append(response.read().decode())
    except Exception as exc:
        out.append(f"error: {exc}")
print(json.dumps(out))
"""


def _pod_spec(command: list[str], port: bool) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main",
        "image": BASE_IMAGE,
        "imagePullPolicy": "Never",
        "command": command,
    }
    if port:
        container["ports"] = [{"containerPort": PORT, "name": "http"}]
        container["readinessProbe"] = {"tcpSocket": {"port": PORT}, "periodSeconds": 1}
    return {"terminationGracePeriodSeconds": 1, "containers": [container], **placement()}


def _deployment(name: str, replicas: int, command: list[str], port: bool) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": _pod_spec(command, port)},
        },
    }


def _service(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": "http"}]},
    }


def _pods(kubectl: Kubectl, namespace: str, app: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kubectl.json("get", "pods", "-n", namespace, "-l", f"app={app}")[
        "items"
    ]
    return items


def _web_and_client(given: Given, replicas: int = 2) -> None:
    """``web`` (``replicas`` servers on the same containerPort) behind a Service, and one
    ``client`` pod that only waits for ``kubectl exec``."""
    web = _deployment("web", replicas, ["python3", "-c", SERVER], port=True)
    client = _deployment(
        "client", 1, ["python3", "-c", "import time; time.sleep(86400)"], port=False
    )
    then = given.objects(web, _service("web"), client).when.applied().then
    then.of("Deployment", "web").field("status.readyReplicas", equals=replicas, timeout=120)
    then.of("Deployment", "client").field("status.readyReplicas", equals=1, timeout=120)


def _fetch_from_client(kubectl: Kubectl, namespace: str, *urls: str) -> list[str]:
    [client] = _pods(kubectl, namespace, "client")
    name = client["metadata"]["name"]
    out = kubectl.run("exec", "-n", namespace, name, "-i", "--", "python3", "-", *urls, stdin=FETCH)
    answers: list[str] = json.loads(out.stdout)
    return answers


def _service_url(kubectl: Kubectl, namespace: str) -> str:
    ip = kubectl.json("get", "service", "web", "-n", namespace)["spec"]["clusterIP"]
    return f"http://{ip}:80/"


def test_two_replicas_on_the_same_container_port_run_side_by_side_on_their_own_addresses(
    real_node: RealNode, given: Given, kubectl: Kubectl, namespace: str
) -> None:
    _web_and_client(given, replicas=2)
    pods = _pods(kubectl, namespace, "web")
    assert len(pods) == 2
    cidr = ipaddress.ip_network(real_node.network.cidr)
    ips = {p["status"]["podIP"] for p in pods}
    assert len(ips) == 2 and all(ipaddress.ip_address(ip) in cidr for ip in ips), ips
    assert all(p["spec"]["nodeName"] == real_node.node_name for p in pods)
    assert not any(p["spec"].get("hostNetwork") for p in pods)
    # Each replica answers on its own address with its own name: from the host ...
    for pod in pods:
        url = f"http://{pod['status']['podIP']}:{PORT}/"
        with urllib.request.urlopen(url, timeout=5) as response:
            assert response.read().decode() == pod["metadata"]["name"]
    # ... and from another pod.
    by_ip = [f"http://{p['status']['podIP']}:{PORT}/" for p in pods]
    assert _fetch_from_client(kubectl, namespace, *by_ip) == [p["metadata"]["name"] for p in pods]


def test_a_cluster_ip_service_routes_to_every_replica_from_a_pod_and_from_the_host(
    real_node: RealNode, given: Given, kubectl: Kubectl, namespace: str
) -> None:
    _web_and_client(given, replicas=2)
    names = {p["metadata"]["name"] for p in _pods(kubectl, namespace, "web")}
    url = _service_url(kubectl, namespace)
    # kube-proxy picks an endpoint at random per connection, so 20 requests reach both
    # replicas once it has both endpoints (the second may land a moment after Ready).
    seen: list[str] = []

    def both_answer() -> bool:
        seen[:] = _fetch_from_client(kubectl, namespace, *[url] * 20)
        return set(seen) == names

    try:
        wait_until(both_answer, what="both replicas answering the Service", timeout=30)
    except TimeoutError:
        raise AssertionError(f"through {url} the client saw {seen}, not {names}") from None
    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.read().decode() in names


def _policy(name: str, egress: list[dict[str, Any]] | None) -> dict[str, Any]:
    """A NetworkPolicy on the client pod: no egress at all, or only ``egress``."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name},
        "spec": {
            "podSelector": {"matchLabels": {"app": "client"}},
            "policyTypes": ["Egress"],
            **({"egress": egress} if egress is not None else {}),
        },
    }


def _until_answers(
    kubectl: Kubectl, namespace: str, urls: list[str], blocked: bool, what: str
) -> list[str]:
    """Poll until every URL fails (``blocked``) or answers; policies apply within seconds."""
    seen: list[str] = []

    def applied() -> bool:
        seen[:] = _fetch_from_client(kubectl, namespace, *urls)
        return all(a.startswith("error:") == blocked for a in seen)

    try:
        wait_until(applied, what=what, timeout=60, interval=0.5)
    except TimeoutError:
        raise AssertionError(f"{what}: the client saw {seen}") from None
    return seen


def test_a_default_deny_egress_policy_blocks_a_pod_and_allowing_the_egress_restores_it(
    real_node: RealNode, given: Given, kubectl: Kubectl, namespace: str
) -> None:
    _web_and_client(given, replicas=1)
    [web] = _pods(kubectl, namespace, "web")
    urls = [f"http://{web['status']['podIP']}:{PORT}/", _service_url(kubectl, namespace)]
    name = web["metadata"]["name"]
    assert _fetch_from_client(kubectl, namespace, *urls) == [name, name]

    kubectl.run("apply", "-n", namespace, "-f", "-", stdin=json.dumps(_policy("deny", None)))
    blocked = _until_answers(kubectl, namespace, urls, True, "the policy blocking the client")
    assert all("timed out" in a for a in blocked), blocked  # dropped, not refused
    # The server itself still runs and answers the host: only the client's egress is cut.
    with urllib.request.urlopen(urls[0], timeout=5) as response:
        assert response.read().decode() == name

    to_web = [{"to": [{"podSelector": {"matchLabels": {"app": "web"}}}], "ports": [{"port": PORT}]}]
    kubectl.run("apply", "-n", namespace, "-f", "-", stdin=json.dumps(_policy("allow", to_web)))
    allowed = _until_answers(kubectl, namespace, urls, False, "the allow policy opening egress")
    assert allowed == [name, name]

    kubectl.run("delete", "networkpolicy", "allow", "-n", namespace)
    _until_answers(kubectl, namespace, urls, True, "deny alone blocking again")
    kubectl.run("delete", "networkpolicy", "deny", "-n", namespace)
    assert _until_answers(kubectl, namespace, urls, False, "no policy: open") == [name, name]


def test_the_pod_cidr_avoids_the_host_networks_and_the_service_cidr() -> None:
    taken = [ipaddress.IPv4Network("10.244.0.0/15"), ipaddress.IPv4Network("192.0.2.0/24")]
    assert podnet.choose_cidr("10.0.0.0/24", taken) == "172.30.244.0/24"
    assert podnet.choose_cidr("10.244.0.0/23", []) == "10.245.0.0/24"
    assert podnet.choose_cidr("10.0.0.0/24", []) == "10.244.0.0/24"
    everything = [ipaddress.IPv4Network("0.0.0.0/1"), ipaddress.IPv4Network("128.0.0.0/1")]
    with pytest.raises(RuntimeError, match="overlaps a network of this host"):
        podnet.choose_cidr("10.0.0.0/24", everything)
