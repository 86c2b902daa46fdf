"""containerd for the real node: its own config, root, state and socket, and ``ctr`` calls.

Why: the kubelet needs a CRI runtime; Debian's containerd 1.6 with runc is the one checked
on this machine. It never touches the host's default paths: everything lives under the
node's directory, the runc root included. Two settings are not defaults and both matter:

- ``restrict_oom_score_adj = true``: this sandbox cannot lower ``oom_score_adj``, and
  without it every pod sandbox fails with runc's "can't get final child's PID from pipe";
- cgroupfs (``SystemdCgroup = false``): no systemd runs here.

With a pod network (``e2e.harness.podnet``) the CRI plugin calls the reference CNI plugins
from their build cache with the node's conflist. Without one, pods must use the host
network, and a placeholder conflist only lets containerd report the network ready.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DISABLED_PLUGINS = (
    "io.containerd.snapshotter.v1.aufs",
    "io.containerd.snapshotter.v1.btrfs",
    "io.containerd.snapshotter.v1.devmapper",
    "io.containerd.snapshotter.v1.zfs",
    "io.containerd.tracing.processor.v1.otlp",
)
NAMESPACE = "k8s.io"


@dataclass(frozen=True)
class ContainerdPaths:
    """Persistent root (content, snapshots: the image cache) and per-run state."""

    root: Path
    state: Path
    config_dir: Path

    @property
    def socket(self) -> Path:
        return self.state / "containerd.sock"

    @property
    def config(self) -> Path:
        return self.config_dir / "containerd.toml"

    @property
    def cni_conf_dir(self) -> Path:
        return self.config_dir / "cni" / "net.d"

    @property
    def cni_bin_dir(self) -> Path:
        return self.config_dir / "cni" / "bin"


def write_config(
    paths: ContainerdPaths,
    sandbox_image: str,
    cni_network: dict[str, Any] | None = None,
    cni_bin_dir: Path | None = None,
) -> Path:
    """Write containerd's TOML config and its CNI config; returns the TOML.

    ``cni_network`` is a conflist whose plugins are in ``cni_bin_dir``; without it, a
    placeholder network for host-network pods.
    """
    bin_dir = cni_bin_dir or paths.cni_bin_dir
    for d in (paths.root, paths.state, paths.cni_conf_dir, bin_dir):
        d.mkdir(parents=True, exist_ok=True)
    cri = '[plugins."io.containerd.grpc.v1.cri"]'
    runc = '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]'
    toml = f"""version = 2
root = "{paths.root}"
state = "{paths.state}"
disabled_plugins = {json.dumps(list(DISABLED_PLUGINS))}

[grpc]
  address = "{paths.socket}"
[ttrpc]
  address = "{paths.socket}.ttrpc"
[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{paths.root / "opt"}"

{cri}
  sandbox_image = "{sandbox_image}"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    {runc}
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{paths.state / "runc"}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{bin_dir}"
    conf_dir = "{paths.cni_conf_dir}"
"""
    paths.config.write_text(toml)
    if cni_network is not None:
        (paths.cni_conf_dir / "10-pods.conflist").write_text(json.dumps(cni_network, indent=2))
        return paths.config
    cni = {
        "cniVersion": "0.4.0",
        "name": "dirigent-host-network-only",
        "plugins": [{"type": "loopback"}],
    }
    (paths.cni_conf_dir / "99-host-network-only.conflist").write_text(json.dumps(cni))
    return paths.config


def ctr(paths: ContainerdPaths, *args: str, timeout: float = 120.0) -> str:
    """Run ``ctr`` against this containerd in the CRI namespace; returns stdout."""
    argv = ["ctr", f"--address={paths.socket}", f"--namespace={NAMESPACE}", *args]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[3:])} exited {result.returncode}: {result.stderr}")
    return result.stdout


def image_names(paths: ContainerdPaths) -> set[str]:
    return set(ctr(paths, "images", "list", "--quiet").split())


def running_pod_names(paths: ContainerdPaths) -> set[str]:
    """Names of the pods with a running task (sandbox or container) in this containerd."""
    names = set()
    for line in ctr(paths, "tasks", "list").splitlines()[1:]:
        cols = line.split()
        if len(cols) >= 3 and cols[2] == "RUNNING":
            info = json.loads(ctr(paths, "containers", "info", cols[0]))
            name = (info.get("Labels") or {}).get("io.kubernetes.pod.name")
            if name:
                names.add(name)
    return names


def import_archive(paths: ContainerdPaths, archive: Path) -> None:
    """Import (and unpack) a docker-archive's images."""
    ctr(paths, "images", "import", str(archive), timeout=600)


def remove_all_containers(paths: ContainerdPaths) -> list[str]:
    """Kill every task and delete every container (and its snapshot) in the CRI namespace."""
    removed = []
    for cid in ctr(paths, "containers", "list", "--quiet").split():
        argv = ["ctr", f"--address={paths.socket}", f"--namespace={NAMESPACE}"]
        # --force kills a running task before deleting it; "not found" means no task.
        subprocess.run(
            [*argv, "tasks", "delete", "--force", cid], capture_output=True, timeout=60, check=False
        )
        ctr(paths, "containers", "delete", cid)
        removed.append(cid)
    return removed
