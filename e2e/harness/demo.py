"""``make demo-up`` / ``make demo-down``: the Kubernetes face of dirigent without Docker.

``up`` starts (or reuses) a cluster — ``DIRIGENT_E2E_KUBECONFIG`` if set, kind through
pytest-kind where a Docker engine answers, else the local control plane of the e2e harness —
installs the CRDs, and starts a detached supervisor that runs an embedded PostgreSQL, the
operator and a worker as local processes (``e2e.harness.system``). It prints ``export``
lines a shell can ``eval``; progress goes to stderr. ``down`` stops the supervisor (which
stops its children and PostgreSQL) and the cluster it started.

``up --real-node`` (``make demo-up REAL_NODE=1``) is the same story with real containers:
the local control plane plus the real node (containerd + kubelet), the supervisor holding
only the embedded PostgreSQL, and dirigent installed by ``helm install`` from the project
image (``make image``) as real pods (``e2e.harness.chartnode``), with ``docker.run``
allowed through the unsafe gate. The pods run on the node's pod network (Services and
NetworkPolicies work; ``kubectl scale`` adds replicas beside the first). It also prints
``DIRIGENT_URL`` (the API Service's cluster IP, which this host routes to the node's pods)
and ``DIRIGENT_TOKEN`` (a ServiceAccount token the API's cluster auth accepts).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

from e2e.harness import chartnode
from e2e.harness.binaries import ensure_binaries
from e2e.harness.clusters import choose_origin
from e2e.harness.controlplane import ControlPlane, read_state, stop_from_state
from e2e.harness.processes import Process, wait_until
from e2e.harness.realnode import RealNode
from e2e.harness.realnode import stop_from_state as stop_real_node
from e2e.harness.system import System
from e2e.helm import CHART, Helm
from e2e.kubectl import Kubectl

DEFAULT_WORKDIR = Path(
    os.environ.get("DIRIGENT_DEMO_WORKDIR", Path.home() / ".cache" / "dirigent" / "demo")
)
STATE = "system.json"
KIND_NAME = "dirigent-demo"
DEMO_NAMESPACE = "dirigent"


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _cluster(workdir: Path) -> tuple[Path, str]:
    origin = choose_origin(os.environ)
    if origin == "existing":
        return Path(os.environ["DIRIGENT_E2E_KUBECONFIG"]), origin
    if origin == "kind":
        from pytest_kind import KindCluster  # type: ignore[import-not-found,unused-ignore]

        kind = KindCluster(KIND_NAME, workdir / "kind.kubeconfig")
        kind.create()
        return Path(kind.kubeconfig_path), origin
    cluster_dir = workdir / "cluster"
    if read_state(cluster_dir) is not None:
        stop_from_state(cluster_dir)
    _say("building or finding the control-plane binaries (hack/k8s/build.sh) ...")
    plane = ControlPlane(bin_dir=ensure_binaries(), workdir=cluster_dir, tie_to_parent=False)
    _say(f"starting the control plane in {cluster_dir} ...")
    return plane.start(), origin


def _cluster_with_node(workdir: Path) -> tuple[Path, str]:
    stop_real_node()  # a node left by an earlier demo; refuses one a test session holds
    cluster_dir = workdir / "cluster"
    if read_state(cluster_dir) is not None:
        stop_from_state(cluster_dir)
    _say("building or finding the control-plane binaries (hack/k8s/build.sh) ...")
    plane = ControlPlane(bin_dir=ensure_binaries(), workdir=cluster_dir, tie_to_parent=False)
    _say(f"starting the control plane in {cluster_dir} ...")
    kubeconfig = plane.start()
    _say("starting the real node (containerd + kubelet; images built once, cached) ...")
    node = RealNode(plane.bin_dir, kubeconfig, plane.pki_dir, tie_to_parent=False)
    try:
        node.start()
    except BaseException:
        plane.stop()
        raise
    return kubeconfig, "local"


def up(workdir: Path, real_node: bool = False) -> int:
    down(workdir, quiet=True)
    workdir.mkdir(parents=True, exist_ok=True)
    kubeconfig, origin = _cluster_with_node(workdir) if real_node else _cluster(workdir)
    (workdir / STATE).unlink(missing_ok=True)
    log = (workdir / "supervisor.log").open("ab")
    supervisor = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "e2e.harness.demo",
            "serve",
            "--workdir",
            str(workdir),
            "--kubeconfig",
            str(kubeconfig),
            "--origin",
            origin,
            *(["--postgres-only"] if real_node else []),
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    _say("starting PostgreSQL, the operator and a worker ...")
    wait_until(
        lambda: (workdir / STATE).exists() or supervisor.poll() is not None,
        what="the dirigent processes",
        timeout=180,
    )
    if not (workdir / STATE).exists():
        _say(f"the supervisor exited; see {workdir / 'supervisor.log'}")
        return 1
    state = json.loads((workdir / STATE).read_text())
    if real_node:
        url, token = _install_chart(kubeconfig, state)
        _say("dirigent runs as pods on the real node; stop with `make demo-down REAL_NODE=1`")
        print(f"export KUBECONFIG={state['kubeconfig']}")
        print(f"export DIRIGENT_URL={url}")
        print(f"export DIRIGENT_TOKEN={token}")
        return 0
    _say(f"dirigent is up; logs in {workdir / 'system' / 'logs'}; stop with `make demo-down`")
    print(f"export KUBECONFIG={state['kubeconfig']}")
    print(f"export DIRIGENT_DATABASE_URL={state['database_url']}")
    print(f"export DIRIGENT_SECRET_KEY={state['secret_key']}")
    return 0


def _install_chart(kubeconfig: Path, state: dict[str, str]) -> tuple[str, str]:
    """``make image``, import it, ``helm install`` in ``dirigent``; the API's URL and a token."""
    kubectl = Kubectl(kubeconfig)
    _say("building the project image (make image) ...")
    image = chartnode.build_project_image()
    node = RealNode(ensure_binaries(), kubeconfig, Path(state["pki_dir"]), tie_to_parent=False)
    _say(f"importing {image} into the real node ...")
    chartnode.load_project_image(node, image)
    kubectl.run("create", "namespace", DEMO_NAMESPACE)
    database_url = chartnode.pod_database_url(node, state["database_url"])
    manifest = chartnode.secrets_manifest(DEMO_NAMESPACE, database_url, state["secret_key"])
    kubectl.run("apply", "-f", "-", stdin=manifest)
    chartnode.adopt_crds(kubectl, "dirigent", DEMO_NAMESPACE)
    values = Path(state["workdir"]) / "values.yaml"
    values.write_text(yaml.safe_dump(chartnode.values(image, "dirigent")))
    _say("helm install dirigent (waits for every pod to be Ready) ...")
    Helm(kubeconfig=kubeconfig).run(
        "install", "dirigent", str(CHART), "-n", DEMO_NAMESPACE, "-f", str(values),
        "--wait", "--timeout", "600s",
    )  # fmt: skip
    token = chartnode.admin_token(kubectl, DEMO_NAMESPACE)
    return chartnode.api_url(kubectl, DEMO_NAMESPACE, "dirigent"), token


def serve(workdir: Path, kubeconfig: Path, origin: str, postgres_only: bool = False) -> int:
    """The supervisor: holds the system (or only its PostgreSQL) until SIGTERM."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    system = System(kubeconfig, workdir / "system", tie_to_parent=True)
    system.start(worker=not postgres_only, operator=not postgres_only)
    try:
        state = {
            "pid": os.getpid(),
            "exe": sys.executable,
            "kubeconfig": str(kubeconfig),
            "origin": origin,
            "database_url": system.database_url,
            "secret_key": system.secret_key,
            "workdir": str(workdir),
            "pki_dir": str(workdir / "cluster" / "pki"),
        }
        tmp = workdir / (STATE + ".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(workdir / STATE)
        stop.wait()
    finally:
        system.stop()
    return 0


def down(workdir: Path, quiet: bool = False) -> int:
    path = workdir / STATE
    if path.exists():
        state = json.loads(path.read_text())
        Process("supervisor", state["pid"], state["exe"], workdir / "supervisor.log").stop(
            timeout=60
        )
        path.unlink(missing_ok=True)
        if state.get("origin") == "kind":
            from pytest_kind import KindCluster

            KindCluster(KIND_NAME, workdir / "kind.kubeconfig").delete()
    node = stop_real_node()
    stopped = stop_from_state(workdir / "cluster")
    if node:
        stopped = ["real node", *stopped]
    if not quiet:
        _say(f"stopped: dirigent and {', '.join(stopped) or 'no local control plane'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.harness.demo", description=__doc__)
    parser.add_argument("command", choices=["up", "down", "serve"])
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    parser.add_argument("--kubeconfig", type=Path)
    parser.add_argument("--origin", default="local")
    parser.add_argument("--real-node", action="store_true", help="dirigent as pods, for real")
    parser.add_argument("--postgres-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    workdir: Path = args.workdir.resolve()
    if args.command == "up":
        return up(workdir, real_node=args.real_node)
    if args.command == "serve":
        return serve(workdir, args.kubeconfig, args.origin, postgres_only=args.postgres_only)
    started = time.monotonic()
    code = down(workdir)
    _say(f"down in {time.monotonic() - started:.1f}s")
    return code


if __name__ == "__main__":
    sys.exit(main())
