"""``python -m e2e.harness up|down|status``: the local control plane from the shell.

Why: `make cluster-up` / `make cluster-down` let a developer poke at the same control plane
the tests use. ``up`` prints only the admin kubeconfig path on stdout (progress goes to
stderr), so ``export KUBECONFIG=$(make -s cluster-up)`` works. The processes outlive this
command; ``down`` stops them using the state file in the work dir. ``up --real-node`` also
starts the real node (containerd + kubelet, see ``realnode``); ``down`` stops it first.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from e2e.harness.binaries import ensure_binaries
from e2e.harness.controlplane import ControlPlane, read_state, stop_from_state
from e2e.harness.realnode import RealNode
from e2e.harness.realnode import stop_from_state as stop_real_node

DEFAULT_WORKDIR = Path(
    os.environ.get("DIRIGENT_E2E_WORKDIR", Path.home() / ".cache" / "dirigent" / "cluster")
)


def _up(workdir: Path, nodes: int, real_node: bool) -> int:
    try:
        stop_real_node()  # a real node left by an earlier `up` belongs to the plane below
    except RuntimeError:
        if real_node:  # a test session uses the one real node this machine can run
            raise
    state = read_state(workdir)
    if state is not None:
        stopped = stop_from_state(workdir)
        print(f"stopped a previous control plane in {workdir}: {stopped}", file=sys.stderr)
    print("building or finding binaries (hack/k8s/build.sh) ...", file=sys.stderr)
    plane = ControlPlane(
        bin_dir=ensure_binaries(), workdir=workdir, nodes=nodes, tie_to_parent=False
    )
    print(f"starting control plane in {workdir} ...", file=sys.stderr)
    kubeconfig = plane.start()
    after = (read_state(workdir) or {}).get("ready_after")
    print(f"ready after {after}s; logs in {plane.log_dir}", file=sys.stderr)
    if real_node:
        print("starting the real node (containerd + kubelet) ...", file=sys.stderr)
        node = RealNode(plane.bin_dir, kubeconfig, plane.pki_dir, tie_to_parent=False)
        try:
            name = node.start()
        except BaseException:
            plane.stop()
            raise
        print(f"real node {name} Ready ({node.timings}); logs in {node.log_dir}", file=sys.stderr)
    print(kubeconfig)
    return 0


def _down(workdir: Path) -> int:
    try:
        node = stop_real_node()
    except RuntimeError as exc:  # a test session's node, not ours to stop
        print(f"left the real node running: {exc}", file=sys.stderr)
    else:
        if node:
            print(f"stopped the real node: {node}", file=sys.stderr)
    stopped = stop_from_state(workdir)
    print(f"stopped: {', '.join(stopped) or 'nothing was running'}", file=sys.stderr)
    return 0


def _status(workdir: Path) -> int:
    state = read_state(workdir)
    if state is None:
        print(f"no control plane in {workdir}", file=sys.stderr)
        return 1
    print(json.dumps(state, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.harness", description=__doc__)
    parser.add_argument("command", choices=["up", "down", "status"])
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument(
        "--real-node", action="store_true", help="also start a real node (containerd + kubelet)"
    )
    args = parser.parse_args(argv)
    workdir: Path = args.workdir.resolve()
    if args.command == "up":
        return _up(workdir, args.nodes, args.real_node)
    if args.command == "down":
        return _down(workdir)
    return _status(workdir)


if __name__ == "__main__":
    sys.exit(main())
