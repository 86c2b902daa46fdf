"""A real node in the local control plane: containerd + runc + a kubelet, on loopback.

Why: kwok only simulates pods; code that runs containers (docker.run Jobs, the Helm chart's
Deployments) must be proven with real ones. The node joins the harness's control plane with
certificates from its CA, is labelled ``dirigent.dev/real-node=true`` and tainted with the
same key, so only pods that ask for it (``placement()``) land there and kwok nodes keep the
rest. Pods must use the host network (there is no CNI) and images imported here
(``imagePullPolicy: Never``; see ``images``).

Invariants:
- one real node per machine at a time: ``<home>/.lock`` is held while it runs (a second
  test session waits); ``<home>/state.json`` records what runs, so ``stop_from_state``
  (or the next start, after a crash) can undo it;
- containerd's root under ``<home>/containerd`` persists (it is the image cache); all else
  lives under ``<home>/run`` and is removed on stop;
- stop undoes by pid and by path: kubelet, containers, containerd, leftover shims, mounts,
  cgroups under the node's cgroup root, the kernel settings the kubelet changed, and the
  host directories the kubelet created (``/var/lib/kubelet/device-plugins``, log links).

The node is named after the host when the host name resolves to loopback: the API server
dials a node's Hostname address first, so logs and exec stay on 127.0.0.1. The kubelet
picks the host's interface address as InternalIP (it refuses a loopback one); nothing
dials it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

from e2e.harness import containerd, hoststate, images, processes
from e2e.harness.certs import CertPair, issue
from e2e.harness.containerd import ContainerdPaths
from e2e.harness.hostpkgs import ensure_packages
from e2e.harness.kubeconfig import write_kubeconfig
from e2e.harness.kubelet import KubeletSettings, write_kubelet_config
from e2e.harness.processes import Process

LABEL = "dirigent.dev/real-node"
TAINT = {"key": LABEL, "value": "true", "effect": "NoSchedule"}
CGROUP_ROOT = "dirigent-real-node"
STATE_FILE = "state.json"
_LEGACY_LOG_LINKS = Path("/var/log/containers")
# Paths the kubelet creates whatever its root dir (device plugins, legacy log links): removed
# on stop when they did not exist before the node started.
_HOST_DIRS = (Path("/var/lib/kubelet"), _LEGACY_LOG_LINKS, Path("/var/log/pods"))


def placement() -> dict[str, Any]:
    """Pod spec fields that put a pod on the real node (merge into ``spec``)."""
    return {
        "nodeSelector": {LABEL: "true"},
        "tolerations": [
            {"key": LABEL, "operator": "Equal", "value": "true", "effect": "NoSchedule"}
        ],
        "hostNetwork": True,
    }


def default_node_name() -> str:
    """The host name when it resolves to loopback (the API server dials it), else localhost."""
    name = socket.gethostname().lower()
    try:
        if socket.gethostbyname(name).startswith("127."):
            return name
    except OSError:
        pass
    return "localhost"


def node_home() -> Path:
    return images.cache_root() / "node"


def prepare_real_node() -> list[images.ImageArchive]:
    """Install missing packages and build missing images (the slow, cacheable part).

    One caller at a time per machine: two pytest-xdist workers (or a test session and
    ``make demo-up``) would otherwise build the same image into podman's one store at once;
    the second waits, then finds everything cached.
    """
    lock_path = images.cache_root() / "prepare.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ensure_packages()
        return images.node_images()


@dataclass
class RealNode:
    """Start with ``start()``, stop with ``stop()``; joins the cluster of ``admin_kubeconfig``."""

    bin_dir: Path
    admin_kubeconfig: Path
    pki_dir: Path
    home: Path = field(default_factory=node_home)
    tie_to_parent: bool = True
    node_name: str = field(default_factory=default_node_name)
    startup_timeout: float = 180.0
    lock_timeout: float = 1800.0
    processes: list[Process] = field(default_factory=list)
    started: list[Process] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    _lock: IO[str] | None = None
    _kernel: dict[str, str] = field(default_factory=dict)
    _new_dirs: list[str] = field(default_factory=list)

    @property
    def run_dir(self) -> Path:
        return self.home / "run"

    @property
    def runtime(self) -> ContainerdPaths:
        return ContainerdPaths(
            root=self.home / "containerd",
            state=self.run_dir / "containerd",
            config_dir=self.run_dir / "etc",
        )

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"

    def __enter__(self) -> RealNode:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> str:
        """Bring the node up and wait until it is Ready; returns the node name."""
        self.home.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        try:
            _stop_recorded(self.home)
            if self.log_dir.exists():  # keep one previous session's logs, not all of them
                shutil.rmtree(self.home / "logs.previous", ignore_errors=True)
                self.log_dir.rename(self.home / "logs.previous")
            if not os.access(self.bin_dir / "kubelet", os.X_OK):
                raise FileNotFoundError(f"no kubelet in {self.bin_dir}: run hack/k8s/build.sh")
            archives = self._timed("prepare", prepare_real_node)
            self._kernel = hoststate.read_kernel_settings()
            self._new_dirs = [str(d) for d in _HOST_DIRS if not d.exists()]
            self._write_state()
            self._start_containerd(archives[0].name)
            self._timed("import", lambda: self._import(archives))
            self._start_kubelet()
        except BaseException:
            self.stop()
            raise
        return self.node_name

    def stop(self) -> dict[str, Any]:
        """Undo everything ``start`` did; returns a report of what was cleaned."""
        try:
            saved = _read_state(self.home) or {}
            report = _teardown(
                self.home,
                self.processes,
                self.runtime,
                self._kernel or saved.get("kernel", {}),
                self._new_dirs or saved.get("new_dirs", []),
            )
            self.processes.clear()
            return report
        finally:
            self._release_lock()

    def leftovers(self, kernel: dict[str, str]) -> list[str]:
        """What a stopped node left on the host (empty when ``stop`` cleaned up everything).

        ``kernel`` is ``kernel_settings`` read before the node started.
        """
        left = [f"mounted: {m}" for m in hoststate.mounts_under(self.run_dir, self.runtime.root)]
        left += [f"process {pid}" for pid in hoststate.pids_with_arg(str(self.runtime.socket))]
        left += [f"cgroup {c}" for c in _cgroup_dirs()]
        now = hoststate.read_kernel_settings()
        left += [f"kernel {k}: {now.get(k)} != {v}" for k, v in kernel.items() if now.get(k) != v]
        left += [f"process {p.name} ({p.pid})" for p in self.started if p.running()]
        left += [f"directory {d}" for d in [self.run_dir, *map(Path, self._new_dirs)] if d.exists()]
        return left

    def load_image(self, archive: Path) -> None:
        """Import a docker-archive (``podman save --format docker-archive``) for pods here."""
        containerd.import_archive(self.runtime, archive)

    def running_pods(self) -> set[str]:
        """Pods whose sandbox or a container runs in this node's containerd right now."""
        return containerd.running_pod_names(self.runtime)

    # -- steps -----------------------------------------------------------------------------

    def _timed(self, what: str, fn: Any) -> Any:
        began = time.monotonic()
        out = fn()
        self.timings[what] = round(time.monotonic() - began, 2)
        return out

    def _take_lock(self) -> None:
        lock = (self.home / ".lock").open("w")
        deadline = time.monotonic() + self.lock_timeout
        told = False
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not told:
                    print(
                        f"waiting for the real node: {self.home / '.lock'} is held", file=sys.stderr
                    )
                    told = True
                if time.monotonic() > deadline:
                    lock.close()
                    raise TimeoutError(f"another real node holds {self.home / '.lock'}") from None
                time.sleep(1)
        self._lock = lock
        state = _read_state(self.home)
        if state and any(Process.from_state(p).running() for p in state.get("processes", [])):
            self._release_lock()
            raise RuntimeError(
                f"a real node started from another shell runs ({self.home / STATE_FILE}); "
                "stop it first: make cluster-down"
            )

    def _release_lock(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def _write_state(self) -> None:
        state = {
            "node": self.node_name,
            "processes": [p.to_state() for p in self.processes],
            "kernel": self._kernel,
            "new_dirs": self._new_dirs,
            "containerd": {
                "root": str(self.runtime.root),
                "state": str(self.runtime.state),
                "config_dir": str(self.runtime.config_dir),
            },
            "timings": self.timings,
        }
        tmp = self.home / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self.home / STATE_FILE)

    def _spawn(self, name: str, argv: list[str]) -> Process:
        proc = processes.start(name, argv, self.log_dir, tie_to_parent=self.tie_to_parent)
        self.processes.append(proc)
        self.started.append(proc)
        self._write_state()
        return proc

    def _start_containerd(self, sandbox_image: str) -> None:
        paths = self.runtime
        config = containerd.write_config(paths, sandbox_image)
        proc = self._spawn(
            "containerd", [shutil.which("containerd") or "containerd", f"--config={config}"]
        )

        def answers() -> bool:
            try:
                containerd.ctr(paths, "version", timeout=5)
            except (RuntimeError, OSError):
                return False
            return True

        processes.wait_until(answers, what="containerd", timeout=self.startup_timeout, process=proc)

    def _import(self, archives: list[images.ImageArchive]) -> None:
        present = containerd.image_names(self.runtime)
        for archive in archives:
            marker = self.runtime.root / f"imported-{archive.path.name}"
            if archive.name in present and marker.exists():
                continue
            containerd.import_archive(self.runtime, archive.path)
            marker.touch()

    def _credentials(self) -> tuple[Path, CertPair]:
        """The kubelet's kubeconfig (node identity) and its serving certificate."""
        ca = CertPair(self.pki_dir / "ca.crt", self.pki_dir / "ca.key")
        pki = self.run_dir / "pki"
        user = f"system:node:{self.node_name}"
        client = issue(ca, pki, "kubelet-client", (user, ("system:nodes",)))
        serving = issue(
            ca,
            pki,
            "kubelet-serving",
            (self.node_name, ()),
            server_names=(self.node_name, "localhost", "127.0.0.1"),
        )
        admin = yaml.safe_load(self.admin_kubeconfig.read_text())
        server = admin["clusters"][0]["cluster"]["server"]
        kubeconfig = write_kubeconfig(
            self.run_dir / "kubelet.kubeconfig", server, ca.cert, client, user
        )
        return kubeconfig, serving

    def _start_kubelet(self) -> None:
        kubeconfig, serving = self._credentials()
        _bind_node_role(self.admin_kubeconfig)
        hoststate.make_cgroup_root(CGROUP_ROOT)
        settings = KubeletSettings(
            port=processes.free_port(),
            healthz_port=processes.free_port(),
            ca_file=self.pki_dir / "ca.crt",
            serving=serving,
            runtime_socket=self.runtime.socket,
            cgroup_root=CGROUP_ROOT,
            pod_logs_dir=self.run_dir / "pods",
            taints=(TAINT,),
        )
        config = write_kubelet_config(self.run_dir / "kubelet.yaml", settings)
        kubelet = self._spawn(
            "kubelet",
            [
                str(self.bin_dir / "kubelet"),
                f"--config={config}",
                f"--kubeconfig={kubeconfig}",
                f"--root-dir={self.run_dir / 'kubelet'}",
                f"--hostname-override={self.node_name}",
                f"--node-labels={LABEL}=true",
                "--v=1",
            ],
        )
        began = time.monotonic()
        processes.wait_until(
            lambda: _node_ready(self.admin_kubeconfig, self.node_name),
            what=f"real node {self.node_name} Ready",
            timeout=self.startup_timeout,
            process=kubelet,
        )
        self.timings["kubelet_ready"] = round(time.monotonic() - began, 2)
        self._write_state()


def _cgroup_dirs() -> list[str]:
    return [
        str(c / CGROUP_ROOT) for c in hoststate.cgroup_hierarchies() if (c / CGROUP_ROOT).exists()
    ]


def _bind_node_role(admin_kubeconfig: Path) -> None:
    """Give group system:nodes the bootstrap ``system:node`` role (RBAC only, no Node authz)."""
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    api = config.new_client_from_config(config_file=str(admin_kubeconfig))  # type: ignore[no-untyped-call]
    try:
        rbac: Any = client.RbacAuthorizationV1Api(api)
        body = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "dirigent-e2e-nodes"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:node",
            },
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}
            ],
        }
        try:
            rbac.create_cluster_role_binding(body)
        except ApiException as exc:
            if exc.status != 409:
                raise
    finally:
        api.close()


def _node_ready(admin_kubeconfig: Path, name: str) -> bool:
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    api = config.new_client_from_config(config_file=str(admin_kubeconfig))  # type: ignore[no-untyped-call]
    try:
        core: Any = client.CoreV1Api(api)
        try:
            node = core.read_node(name)
        except ApiException:
            return False
        conds = node.status.conditions or []
        return any(c.type == "Ready" and c.status == "True" for c in conds)
    finally:
        api.close()


def _read_state(home: Path) -> dict[str, Any] | None:
    path = home / STATE_FILE
    if not path.exists():
        return None
    state: dict[str, Any] = json.loads(path.read_text())
    return state


def _teardown(
    home: Path,
    procs: list[Process],
    runtime: ContainerdPaths,
    kernel: dict[str, str],
    new_dirs: list[str],
) -> dict[str, Any]:
    """Stop and clean in dependency order; every step runs even if an earlier one failed."""
    report: dict[str, Any] = {}
    by_name = {p.name: p for p in procs}
    if "kubelet" in by_name:
        by_name["kubelet"].stop()
    cd = by_name.get("containerd")
    if cd is not None and cd.running():
        with contextlib.suppress(RuntimeError, OSError):
            report["containers"] = len(containerd.remove_all_containers(runtime))
    if cd is not None:
        cd.stop()
    shims = hoststate.pids_with_arg(str(runtime.socket))
    hoststate.kill_pids(shims)
    strays = hoststate.pids_in_cgroup_root(CGROUP_ROOT)
    hoststate.kill_pids(strays)
    report["leftover_pids_killed"] = len(shims) + len(strays)
    report["unmounted"] = len(hoststate.unmount_under(home / "run", runtime.root))
    report["cgroups_left"] = hoststate.remove_cgroup_root(CGROUP_ROOT)
    report["kernel_restored"] = hoststate.restore_kernel_settings(kernel)
    pods = home / "run" / "pods"
    if _LEGACY_LOG_LINKS.is_dir():
        for link in _LEGACY_LOG_LINKS.iterdir():
            if link.is_symlink() and str(os.readlink(link)).startswith(str(pods)):
                link.unlink(missing_ok=True)
    for d in new_dirs:
        shutil.rmtree(d, ignore_errors=True)
    shutil.rmtree(home / "run", ignore_errors=True)
    (home / STATE_FILE).unlink(missing_ok=True)
    return report


def stop_from_state(home: Path | None = None) -> dict[str, Any]:
    """Undo a real node started by another (maybe dead) process; {} when none was recorded.

    Refuses while a test session holds the node's lock: that node is in use.
    """
    home = home or node_home()
    if not (home / STATE_FILE).exists():
        return {}
    with (home / ".lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RuntimeError(
                f"a test session is using the real node ({home / '.lock'})"
            ) from None
        return _stop_recorded(home)


def _stop_recorded(home: Path) -> dict[str, Any]:
    state = _read_state(home)
    if state is None:
        return {}
    procs = [Process.from_state(p) for p in state.get("processes", [])]
    paths = state.get("containerd", {})
    runtime = ContainerdPaths(
        root=Path(paths.get("root", home / "containerd")),
        state=Path(paths.get("state", home / "run" / "containerd")),
        config_dir=Path(paths.get("config_dir", home / "run" / "etc")),
    )
    return _teardown(home, procs, runtime, state.get("kernel", {}), state.get("new_dirs", []))
