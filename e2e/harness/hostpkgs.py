"""The Debian packages a real node needs, installed with apt-get when missing.

Why: the real node runs containers through Debian's containerd and runc and builds its
images with mmdebstrap and podman; none of them is a Python dependency. The list lives in
hack/k8s/realnode-packages.txt so CI (.ci/run) and the harness install the same set.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from e2e.harness.binaries import REPO_ROOT

PACKAGES_FILE = REPO_ROOT / "hack" / "k8s" / "realnode-packages.txt"


def required_packages(path: Path = PACKAGES_FILE) -> list[str]:
    """Package names, one a line; comments and blanks ignored."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def missing_packages(packages: list[str]) -> list[str]:
    """The packages dpkg does not report as installed."""
    missing = []
    for pkg in packages:
        result = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True, check=False
        )
        if result.returncode != 0 or "install ok installed" not in result.stdout:
            missing.append(pkg)
    return missing


def ensure_packages(packages: list[str] | None = None) -> list[str]:
    """Install what is missing (as root, through apt-get); returns what was installed."""
    wanted = required_packages() if packages is None else packages
    if shutil.which("dpkg-query") is None:
        raise RuntimeError("the real node needs a Debian host (dpkg-query not found)")
    missing = missing_packages(wanted)
    if not missing:
        return []
    if os.geteuid() != 0:
        raise RuntimeError(
            f"the real node needs {' '.join(missing)}; install them: "
            f"sudo apt-get install -y {' '.join(missing)}"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    apt = ["apt-get", "-o", "DPkg::Lock::Timeout=600", "-y", "-qq"]
    install = subprocess.run([*apt, "install", *missing], env=env, check=False)
    if install.returncode != 0:  # stale package lists on a fresh machine: refresh once
        subprocess.run([*apt, "update"], env=env, check=True)
        subprocess.run([*apt, "install", *missing], env=env, check=True)
    return missing
