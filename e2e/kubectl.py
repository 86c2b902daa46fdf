"""kubectl bound to one kubeconfig: the e2e suite's way to apply and read any resource.

Why kubectl rather than the Python client for generic resources: it resolves any kind
(including CRDs installed a second ago) through discovery, applies multi-document
manifests as users do, and its error text is what a user would see. Typed API calls
(SubjectAccessReview, webhook configurations) use the Python client instead.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class KubectlError(RuntimeError):
    """kubectl exited non-zero; ``stderr`` holds its message."""

    def __init__(self, args: list[str], returncode: int, stderr: str) -> None:
        super().__init__(f"kubectl {' '.join(args)} exited {returncode}: {stderr.strip()}")
        self.args_ = args
        self.returncode = returncode
        self.stderr = stderr


@dataclass(frozen=True)
class Kubectl:
    kubeconfig: Path
    binary: str = os.environ.get("DIRIGENT_KUBECTL", "kubectl")
    timeout: float = 60.0

    def run(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        argv = [self.binary, f"--kubeconfig={self.kubeconfig}", "--request-timeout=30s", *args]
        result = subprocess.run(
            argv, input=stdin, capture_output=True, text=True, timeout=self.timeout, check=False
        )
        if check and result.returncode != 0:
            raise KubectlError(list(args), result.returncode, result.stderr)
        return result

    def json(self, *args: str, stdin: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.run(*args, "-o", "json", stdin=stdin).stdout)
        return out
