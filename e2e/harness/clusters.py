"""Choose the cluster the e2e suite runs against, and clean up what we started.

Why: the same tests must run on a developer's existing cluster, on kind where Docker exists,
and on this Docker-less machine. The order is fixed (ARCHITECTURE.md §7):

1. ``DIRIGENT_E2E_KUBECONFIG`` names any existing cluster: used as is, never stopped;
2. a Docker engine answers ``docker info``: a kind cluster through pytest-kind;
3. otherwise the local control plane built from upstream sources (see controlplane).

pytest-kind is imported only in branch 2, so machines without Docker never need it.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from e2e.harness.binaries import ensure_binaries
from e2e.harness.controlplane import ControlPlane

Origin = Literal["existing", "kind", "local"]
KUBECONFIG_ENV = "DIRIGENT_E2E_KUBECONFIG"
KIND_CLUSTER_NAME = "dirigent-e2e"


@dataclass(frozen=True)
class Cluster:
    """A reachable cluster: where its kubeconfig is and which branch provided it."""

    kubeconfig: Path
    origin: Origin
    # The CA a real node's certificates are signed by; only the local control plane has one.
    pki_dir: Path | None = None

    def api_client(self) -> Any:
        """A fresh ``kubernetes.client.ApiClient``; the caller closes it."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig))  # type: ignore[no-untyped-call]


def docker_answers() -> bool:
    """True when a Docker engine is reachable (not merely a docker CLI on PATH)."""
    if shutil.which("docker") is None:
        return False
    try:
        result = subprocess.run(["docker", "info"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0


def choose_origin(env: Mapping[str, str], docker: Callable[[], bool] = docker_answers) -> Origin:
    """Which branch ``provide_cluster`` takes, without starting anything."""
    if env.get(KUBECONFIG_ENV):
        return "existing"
    if docker():
        return "kind"
    return "local"


@contextmanager
def provide_cluster(
    workdir: Path,
    env: Mapping[str, str],
    docker: Callable[[], bool] = docker_answers,
) -> Iterator[Cluster]:
    """Yield a cluster chosen in the documented order; stop it afterwards if we started it."""
    origin = choose_origin(env, docker)
    if origin == "existing":
        path = Path(env[KUBECONFIG_ENV]).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"{KUBECONFIG_ENV}={path} is not a file")
        yield Cluster(path, "existing")
    elif origin == "kind":
        with _kind_cluster(workdir) as kubeconfig:
            yield Cluster(kubeconfig, "kind")
    else:
        plane = ControlPlane(bin_dir=ensure_binaries(env), workdir=workdir, tie_to_parent=True)
        with plane:
            yield Cluster(plane.kubeconfig, "local", plane.pki_dir)


@contextmanager
def _kind_cluster(workdir: Path) -> Iterator[Path]:
    try:
        from pytest_kind import KindCluster  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise RuntimeError(
            "A Docker engine answers `docker info`, so the e2e suite runs on kind, but "
            "pytest-kind is not installed. Install it: `uv add --group dev pytest-kind`. "
            f"Or point {KUBECONFIG_ENV} at an existing cluster's kubeconfig."
        ) from exc
    kind = KindCluster(KIND_CLUSTER_NAME, workdir / "kind.kubeconfig")
    kind.create()
    try:
        yield Path(kind.kubeconfig_path)
    finally:
        kind.delete()
