"""A real node in the local control plane: containerd + runc + a kubelet, with pod networking.

Why: kwok only simulates pods; code that runs containers (docker.run Jobs, the Helm chart's
Deployments) must be proven with real ones. The node joins the harness's control plane with
certificates from its CA, is labelled ``dirigent.dev/real-node=true`` and tainted with the
same key, so only pods that ask for it (``placement()``) land there and kwok nodes keep the
rest. Pods use images imported here (``imagePullPolicy: Never``; see ``images``). Each pod
gets its own address on a bridge only this machine has (``podnet``: the reference CNI
plugins), kube-proxy makes Services route (``kubeproxy``) and kube-network-policies enforces
NetworkPolicies (``netpolicy``); pods reach the API server at the ``kubernetes`` Service
address and host ports opened with ``expose_host_port`` at the bridge's gateway address.
``RealNode(pod_network=False)`` is the older host-network-only node.

Invariants:
- one real node per machine at a time: ``<home>/.lock`` is held while it runs (a second
  test session waits); ``<home>/state.json`` records what runs, so ``stop_from_state``
  (or the next start, after a crash) can undo it;
- containerd's root under ``<home>/containerd`` persists (it is the image cache); all else
  lives under ``<home>/run`` and is removed on stop;
- stop undoes by pid and by path: kubelet, kube-proxy, containers, containerd, leftover
  shims, mounts, cgroups under the node's cgroup root, the kernel settings the kubelet
  changed, the host directories the kubelet and the CNI library created
  (``/var/lib/kubelet/device-plugins``, log links, ``/var/lib/cni``), and the pod network
  (bridge, pod network namespaces, nftables tables, network sysctls: ``podnet.teardown``,
  from the snapshot recorded in ``state.json`` before anything changed).

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

from e2e.harness import containerd, hoststate, images, netpolicy, podnet, processes
from e2e.harness.binaries import ensure_net_binaries, pinned_versions
from e2e.harness.certs import CertPair, issue
from e2e.harness.containerd import ContainerdPaths
from e2e.harness.controlplane import SERVICE_CIDR, SERVICE_IP
from e2e.harness.hostpkgs import ensure_packages
from e2e.harness.kubeconfig import write_kubeconfig
from e2e.harness.kubelet import KubeletSettings, write_kubelet_config
from e2e.harness.kubeproxy import KubeProxySettings, write_kube_proxy_config
from e2e.harness.podnet import PodNetwork
from e2e.harness.processes import Process

LABEL = "dirigent.dev/real-node"
TAINT = {"key": LABEL, "value": "true", "effect": "NoSchedule"}
CGROUP_ROOT = "dirigent-real-node"
STATE_FILE = "state.json"
_LEGACY_LOG_LINKS = Path("/var/log/containers")
# Paths the kubelet creates whatever its root dir (device plugins, legacy log links): removed
# on stop when they did not exist before the node started.
# /var/lib/cni is the CNI library's result cache (containerd 1.6 cannot move it).
_HOST_DIRS = (
    Path("/var/lib/kubelet"),
    _LEGACY_LOG_LINKS,
    Path("/var/log/pods"),
    Path("/var/lib/cni"),
)


def placement() -> dict[str, Any]:
    """Pod spec fields that put a pod on the real node (merge into ``spec``)."""
    return {
        "nodeSelector": {LABEL: "true"},
        "tolerations": [
            {"key": LABEL, "operator": "Equal", "value": "true", "effect": "NoSchedule"}
        ],
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


def prepare_real_node(pod_network: bool = True) -> list[images.ImageArchive]:
    """Install missing packages, build missing programs and images (the slow, cacheable
    part); the pause image comes first.

    One caller at a time per machine: two pytest-xdist workers (or a test session and
    ``make demo-up``) would otherwise build the same image into podman's one store at once;
    the second waits, then finds everything cached.
    """
    lock_path = images.cache_root() / "prepare.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ensure_packages()
        archives = images.node_images()
        if pod_network:
            ensure_net_binaries("cni")
            version = pinned_versions()["KUBE_NETWORK_POLICIES_VERSION"]
            agent = netpolicy.agent_archive(ensure_net_binaries(netpolicy.NAME), version)
            archives.append(agent)
        return archives


@dataclass
class RealNode:
    """Start with ``start()``, stop with ``stop()``; joins the cluster of ``admin_kubeconfig``."""

    bin_dir: Path
    admin_kubeconfig: Path
    pki_dir: Path
    home: Path = field(default_factory=node_home)
    tie_to_parent: bool = True
    pod_network: bool = True
    node_name: str = field(default_factory=default_node_name)
    startup_timeout: float = 180.0
    lock_timeout: float = 1800.0
    processes: list[Process] = field(default_factory=list)
    started: list[Process] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    _lock: IO[str] | None = None
    _kernel: dict[str, str] = field(default_factory=dict)
    _new_dirs: list[str] = field(default_factory=list)
    _net: PodNetwork | None = None
    _net_saved: dict[str, Any] = field(default_factory=dict)

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
            archives = self._timed("prepare", lambda: prepare_real_node(self.pod_network))
            self._kernel = hoststate.read_kernel_settings()
            self._new_dirs = [str(d) for d in _HOST_DIRS if not d.exists()]
            if self.pod_network:
                self._plan_network()
            self._write_state()  # before any change: a crash from here on is undone
            if self._net is not None:
                podnet.setup(self._net)
            self._start_containerd(archives[0].name)
            self._timed("import", lambda: self._import(archives))
            self._start_kubelet()
            if self._net is not None:
                self._timed("kube_proxy", self._start_kube_proxy)
                self._timed("policy_agent", self._start_policy_agent)
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
                self._network_state() or saved.get("network"),
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
        if self._net is not None:
            left += podnet.leftovers(self._net_saved, self._net.bridge)
        return left

    @property
    def network(self) -> PodNetwork:
        """The pod network of this node, or of the one ``state.json`` records as running."""
        if self._net is None:
            recorded = (_read_state(self.home) or {}).get("network")
            if not recorded:
                raise RuntimeError(f"no real node with a pod network runs ({self.home})")
            self._net = PodNetwork.from_state(recorded["pod_network"])
        return self._net

    def expose_host_port(self, port: int) -> str:
        """Let this node's pods reach ``127.0.0.1:port`` of the host; returns the address
        they use for it (the bridge's gateway, same port)."""
        podnet.expose_host_port(port)
        return self.network.gateway

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
            "network": self._network_state(),
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

    def _network_state(self) -> dict[str, Any] | None:
        if self._net is None:
            return None
        return {"pod_network": self._net.to_state(), "saved": self._net_saved}

    def _plan_network(self) -> None:
        """Choose the pod CIDR and record what exists before the network is made."""
        admin = yaml.safe_load(self.admin_kubeconfig.read_text())
        port = int(admin["clusters"][0]["cluster"]["server"].rsplit(":", 1)[1])
        self._net_saved = podnet.snapshot()
        self._net = PodNetwork(
            cidr=podnet.choose_cidr(SERVICE_CIDR),
            service_cidr=SERVICE_CIDR,
            service_ip=SERVICE_IP,
            api_port=port,
        )

    def _spawn(self, name: str, argv: list[str]) -> Process:
        proc = processes.start(name, argv, self.log_dir, tie_to_parent=self.tie_to_parent)
        self.processes.append(proc)
        self.started.append(proc)
        self._write_state()
        return proc

    def _start_containerd(self, sandbox_image: str) -> None:
        paths = self.runtime
        if self._net is not None:
            network = podnet.cni_conflist(self._net, self.run_dir / "cni-ipam")
            config = containerd.write_config(
                paths, sandbox_image, network, ensure_net_binaries("cni")
            )
        else:
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

    def _start_kube_proxy(self) -> None:
        """kube-proxy with its own identity; waits until it has programmed the Services."""
        assert self._net is not None
        ca = CertPair(self.pki_dir / "ca.crt", self.pki_dir / "ca.key")
        user = "system:kube-proxy"  # bound to system:node-proxier by bootstrap RBAC
        client = issue(ca, self.run_dir / "pki", "kube-proxy-client", (user, ()))
        admin = yaml.safe_load(self.admin_kubeconfig.read_text())
        kubeconfig = write_kubeconfig(
            self.run_dir / "kube-proxy.kubeconfig",
            admin["clusters"][0]["cluster"]["server"],
            ca.cert,
            client,
            user,
        )
        settings = KubeProxySettings(
            node_name=self.node_name,
            kubeconfig=kubeconfig,
            cluster_cidr=self._net.cidr,
            gateway=self._net.gateway,
            healthz_port=processes.free_port(),
            metrics_port=processes.free_port(),
        )
        config = write_kube_proxy_config(self.run_dir / "kube-proxy.yaml", settings)
        binary = self.bin_dir / "kube-proxy"
        if not os.access(binary, os.X_OK):
            raise FileNotFoundError(f"no kube-proxy in {self.bin_dir}: run hack/k8s/build.sh")
        proc = self._spawn("kube-proxy", [str(binary), f"--config={config}", "--v=1"])
        processes.wait_until(
            processes.http_ok(f"http://127.0.0.1:{settings.healthz_port}/healthz"),
            what="kube-proxy /healthz (Services programmed)",
            timeout=self.startup_timeout,
            process=proc,
        )

    def _start_policy_agent(self) -> None:
        """kube-network-policies as a DaemonSet pod here; waits until its table exists."""
        assert self._net is not None
        version = pinned_versions()["KUBE_NETWORK_POLICIES_VERSION"]
        docs = netpolicy.manifests(
            netpolicy.image_name(version), LABEL, self._net.api_port, processes.free_port()
        )
        netpolicy.deploy(self.admin_kubeconfig, docs)

        def enforcing() -> bool:
            return netpolicy.agent_ready(self.admin_kubeconfig) and (
                netpolicy.NFT_TABLE in podnet.nft_tables()
            )

        processes.wait_until(
            enforcing,
            what=f"{netpolicy.NAME} Ready with its nftables table",
            timeout=self.startup_timeout,
        )


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
    network: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Stop and clean in dependency order; every step runs even if an earlier one failed."""
    report: dict[str, Any] = {}
    by_name = {p.name: p for p in procs}
    for name in ("kubelet", "kube-proxy"):
        if name in by_name:
            by_name[name].stop()
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
    if network:  # after every process in the pods' namespaces is gone
        bridge = network["pod_network"].get("bridge", podnet.BRIDGE)
        report["network"] = podnet.teardown(network.get("saved", {}), bridge)
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
    return _teardown(
        home,
        procs,
        runtime,
        state.get("kernel", {}),
        state.get("new_dirs", []),
        state.get("network"),
    )
