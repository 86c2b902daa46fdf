"""The real node's kubelet configuration.

Why: the kubelet's defaults assume a dedicated machine (``/var/lib/kubelet``,
``/var/log/pods``, iptables chains, cgroups at the hierarchy root, systemd). Here it is a
guest on a shared host, so its config keeps every path under the node's directory, its
cgroups under one root we remove afterwards, and its listeners on 127.0.0.1:

- ``failCgroupV1: false`` and ``cgroupDriver: cgroupfs``: this kernel has cgroup v1 and no
  systemd runs;
- authentication by the cluster CA and webhook authorization, so the API server (which holds
  a kubelet client certificate) reads logs and execs, and nobody anonymous does;
- image garbage collection off: images are imported, never pulled back;
- eviction thresholds low: a busy shared disk must not evict test pods;
- ``makeIPTablesUtilChains: false``: the host's iptables stay untouched (kube-proxy runs in
  nftables mode, in its own tables).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e.harness.certs import CertPair


@dataclass(frozen=True)
class KubeletSettings:
    """What varies between nodes: listeners, credentials, paths, taints."""

    port: int
    healthz_port: int
    ca_file: Path
    serving: CertPair
    runtime_socket: Path
    cgroup_root: str
    pod_logs_dir: Path
    taints: tuple[dict[str, str], ...]


def kubelet_config(s: KubeletSettings) -> dict[str, Any]:
    """A ``KubeletConfiguration`` (kubelet.config.k8s.io/v1beta1) as a dict."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": "127.0.0.1",
        "port": s.port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": s.healthz_port,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(s.ca_file)},
        },
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": str(s.serving.cert),
        "tlsPrivateKeyFile": str(s.serving.key),
        "containerRuntimeEndpoint": f"unix://{s.runtime_socket}",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{s.cgroup_root}",
        "cgroupsPerQOS": True,
        "enforceNodeAllocatable": ["pods"],
        "failCgroupV1": False,
        "failSwapOn": False,
        "makeIPTablesUtilChains": False,
        "podLogsDir": str(s.pod_logs_dir),
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "50Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
        },
        "registerWithTaints": [dict(t) for t in s.taints],
        "serializeImagePulls": False,
        "resolvConf": "/etc/resolv.conf",
        "staticPodPath": "",
        "nodeStatusReportFrequency": "10s",
        "syncFrequency": "10s",
        "fileCheckFrequency": "20s",
        "shutdownGracePeriod": "0s",
    }


def write_kubelet_config(path: Path, s: KubeletSettings) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(kubelet_config(s), sort_keys=False))
    return path
