"""kube-proxy for the real node: Services route to the node's pods, nftables mode.

Why: without it a Service's cluster IP answers nothing. kube-proxy is built from the same
Kubernetes source tree and version as the kubelet (hack/k8s/build.sh) and runs as a host
process next to it, with its own client certificate (user ``system:kube-proxy``, which the
API server's bootstrap RBAC binds to ``system:node-proxier``). Its defaults assume a
dedicated machine; this configuration keeps it a guest:

- ``nftables`` mode: everything it programs lives in its own tables (``ip kube-proxy``,
  ``ip6 kube-proxy``), removed by name on teardown; iptables mode would also set the
  host-wide ``route_localnet`` for localhost NodePorts;
- conntrack sizing and timeouts left as the host has them (zero means "do not set");
- NodePorts only on the bridge's gateway address, never on the host's own interfaces;
- health and metrics listeners on 127.0.0.1;
- ``clusterCIDR`` is the pod CIDR: traffic from outside it to a Service is masqueraded to
  the gateway address, so replies come back through the host.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class KubeProxySettings:
    node_name: str
    kubeconfig: Path
    cluster_cidr: str
    gateway: str
    healthz_port: int
    metrics_port: int


def kube_proxy_config(s: KubeProxySettings) -> dict[str, Any]:
    """A ``KubeProxyConfiguration`` (kubeproxy.config.k8s.io/v1alpha1) as a dict."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(s.kubeconfig)},
        "hostnameOverride": s.node_name,
        "bindAddress": "127.0.0.1",
        "healthzBindAddress": f"127.0.0.1:{s.healthz_port}",
        "metricsBindAddress": f"127.0.0.1:{s.metrics_port}",
        "bindAddressHardFail": True,
        "mode": "nftables",
        "nftables": {"syncPeriod": "30s", "minSyncPeriod": "0s"},
        "clusterCIDR": s.cluster_cidr,
        "detectLocalMode": "ClusterCIDR",
        "nodePortAddresses": [f"{s.gateway}/32"],
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
            "udpTimeout": "0s",
            "udpStreamTimeout": "0s",
        },
        "configSyncPeriod": "15m",
    }


def write_kube_proxy_config(path: Path, s: KubeProxySettings) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(kube_proxy_config(s), sort_keys=False))
    return path
