"""Where the control plane's binaries are, building them first if needed.

Why: the binaries come from hack/k8s/build.sh (pinned in hack/k8s/versions.env and cached
under ~/.cache/dirigent/k8s/<versions-key>/bin). The script is the single source of truth
for the cache layout: it returns at once when everything is built and prints the bin dir
on its last stdout line, so Python never re-derives the key.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "hack" / "k8s" / "build.sh"
NET_BUILD_SCRIPT = REPO_ROOT / "hack" / "k8s" / "build-net.sh"
VERSIONS_FILE = REPO_ROOT / "hack" / "k8s" / "versions.env"
TOOLS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


def pinned_versions(path: Path = VERSIONS_FILE) -> dict[str, str]:
    """KEY=VALUE lines of versions.env (comments and blanks ignored)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def ensure_binaries(env: Mapping[str, str] | None = None) -> Path:
    """The bin dir holding every tool; runs build.sh (progress on stderr) when needed.

    ``DIRIGENT_K8S_BIN_DIR`` points at a ready-made bin dir and skips the script.
    """
    environ = dict(os.environ if env is None else env)
    override = environ.get("DIRIGENT_K8S_BIN_DIR")
    if override:
        bin_dir = Path(override)
    else:
        result = subprocess.run(
            ["bash", str(BUILD_SCRIPT)],
            stdout=subprocess.PIPE,
            text=True,
            env=environ,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"{BUILD_SCRIPT} failed with exit code {result.returncode}")
        bin_dir = Path(result.stdout.strip().splitlines()[-1])
    missing = [t for t in TOOLS if not os.access(bin_dir / t, os.X_OK)]
    if missing:
        raise RuntimeError(f"{bin_dir} lacks {', '.join(missing)}")
    return bin_dir


def ensure_net_binaries(tool: str) -> Path:
    """The bin dir of a pod network program (``cni`` or ``kube-network-policies``), built by
    hack/k8s/build-net.sh when missing (progress on stderr)."""
    result = subprocess.run(
        ["bash", str(NET_BUILD_SCRIPT), tool], stdout=subprocess.PIPE, text=True, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"{NET_BUILD_SCRIPT} {tool} failed with exit code {result.returncode}")
    return Path(result.stdout.strip().splitlines()[-1])
