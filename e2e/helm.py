"""helm bound to one kubeconfig, and the chart's rendering helpers for the e2e suite.

Why a wrapper: every call needs the same kubeconfig and a timeout, and a failing call
should fail the test with helm's own message. The binary is the one the e2e harness builds
(hack/k8s/build.sh), or ``DIRIGENT_HELM`` / ``helm`` on PATH against an existing cluster.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e.harness.binaries import REPO_ROOT, ensure_binaries

CHART = REPO_ROOT / "charts" / "dirigent"
KUBE_VERSION = "1.33.0"  # what `helm template` assumes without a cluster


def helm_binary() -> str:
    override = os.environ.get("DIRIGENT_HELM")
    if override:
        return override
    built = ensure_binaries() / "helm"
    if built.exists():
        return str(built)
    found = shutil.which("helm")
    assert found, "no helm: build it with `bash hack/k8s/build.sh` or set DIRIGENT_HELM"
    return found


@dataclass(frozen=True)
class Helm:
    kubeconfig: Path | None = None
    binary: str = ""
    timeout: float = 300.0

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = [self.binary or helm_binary(), *args]
        if self.kubeconfig is not None:
            argv.append(f"--kubeconfig={self.kubeconfig}")
        result = subprocess.run(
            argv, capture_output=True, text=True, timeout=self.timeout, check=False
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"helm {' '.join(args)} exited {result.returncode}:\n{result.stderr}"
            )
        return result

    def template(
        self, *sets: str, release: str = "dirigent", namespace: str = "dirigent"
    ) -> list[dict[str, Any]]:
        """Rendered documents (hooks and tests included) for ``--set`` pairs ``sets``."""
        args = ["template", release, str(CHART), "-n", namespace, "--kube-version", KUBE_VERSION]
        for pair in REQUIRED + list(sets):
            args += ["--set", pair]
        out = self.run(*args).stdout
        return [d for d in yaml.safe_load_all(out) if d]


# The two values the chart cannot default.
REQUIRED = [
    "database.existingSecret=dirigent-database",
    "secretKey.existingSecret=dirigent-secret-key",
]


def by_kind(docs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for d in docs:
        out.setdefault(d["kind"], []).append(d)
    return out
