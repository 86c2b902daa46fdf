"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok, each a child process, all state under one work dir.

Why: e2e tests need a genuine apiserver (CRD schemas, CEL rules, RBAC, admission webhooks)
and genuine controllers (Jobs create pods, service-account tokens), but there is no Docker
here. kwok stands in for kubelets, so pods are scheduled and complete without containers.

Invariants:
- every listener binds 127.0.0.1 on a port picked free at start;
- ``state.json`` in the work dir is rewritten after each process starts, so ``stop`` (or
  ``python -m e2e.harness down`` from another process) can stop a half-started plane;
- components stop in reverse start order (kwok first, etcd last).
"""

from __future__ import annotations

import json
import shutil
import ssl
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.harness import processes
from e2e.harness.certs import Pki, generate_pki
from e2e.harness.kubeconfig import write_kubeconfig
from e2e.harness.kwok import fake_node, stages_config
from e2e.harness.processes import Process

SERVICE_CIDR = "10.0.0.0/24"
SERVICE_IP = "10.0.0.1"
STATE_FILE = "state.json"
ADMIN_KUBECONFIG = "admin.kubeconfig"

# file stem -> (user name, groups). The components get their own bootstrap-RBAC identities,
# as in a kubeadm cluster; kwok updates any node or pod status, so it gets system:masters.
_CLIENTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "admin": ("dirigent-e2e-admin", ("system:masters",)),
    "controller-manager": ("system:kube-controller-manager", ()),
    "scheduler": ("system:kube-scheduler", ()),
    "kwok": ("dirigent-e2e-kwok", ("system:masters",)),
    # The apiserver's identity towards kubelets (logs, exec), as kubeadm's
    # apiserver-kubelet-client; a real node's kubelet authorizes it by webhook.
    "apiserver-kubelet-client": ("kube-apiserver-kubelet-client", ("system:masters",)),
}


@dataclass
class ControlPlane:
    """Start with ``start()`` (returns the admin kubeconfig), stop with ``stop()``."""

    bin_dir: Path
    workdir: Path
    nodes: int = 3
    # True for pytest (children die with it); False for `cluster-up`, which must outlive us.
    tie_to_parent: bool = True
    startup_timeout: float = 120.0
    processes: list[Process] = field(default_factory=list)

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / ADMIN_KUBECONFIG

    @property
    def log_dir(self) -> Path:
        return self.workdir / "logs"

    @property
    def pki_dir(self) -> Path:
        """The CA (``ca.crt``/``ca.key``) a real node's certificates are signed by."""
        return self.workdir / "pki"

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> Path:
        """Bring everything up and wait until nodes are Ready; stops all on any failure.

        Ports are picked free and then bound by another process, so another program can
        win the race in between; that one case (seen in the logs) is retried once.
        """
        for attempt in (1, 2):
            try:
                self._start()
            except BaseException as exc:
                lost_port_race = isinstance(exc, RuntimeError | TimeoutError) and any(
                    "address already in use" in processes.log_tail(p.log) for p in self.processes
                )
                self.stop()
                if attempt == 1 and lost_port_race:
                    continue
                raise
            break
        return self.kubeconfig

    def stop(self) -> None:
        """Stop every process (reverse order) and forget the state; logs stay for reading."""
        for proc in reversed(self.processes):
            proc.stop()
        self.processes.clear()
        (self.workdir / STATE_FILE).unlink(missing_ok=True)
        shutil.rmtree(self.workdir / "etcd-data", ignore_errors=True)

    # -- startup ---------------------------------------------------------------------------

    def _start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        pki = generate_pki(self.pki_dir, _CLIENTS, service_ip=SERVICE_IP)
        etcd_url = self._start_etcd()
        server = self._start_apiserver(pki, etcd_url)
        kubeconfigs = {
            stem: write_kubeconfig(
                self.workdir / f"{stem}.kubeconfig",
                server,
                pki.ca.cert,
                pki.clients[stem],
                user=_CLIENTS[stem][0],
            )
            for stem in _CLIENTS
        }
        self._start_controller_manager(pki, kubeconfigs["controller-manager"])
        self._start_scheduler(kubeconfigs["scheduler"])
        self._start_kwok(kubeconfigs["kwok"])
        self._create_nodes_and_wait()
        self._write_state(server=server, ready_after=round(time.monotonic() - began, 1))

    def _spawn(self, name: str, argv: list[str]) -> Process:
        proc = processes.start(name, argv, self.log_dir, tie_to_parent=self.tie_to_parent)
        self.processes.append(proc)
        self._write_state()
        return proc

    def _write_state(self, **extra: Any) -> None:
        state = {
            "kubeconfig": str(self.kubeconfig),
            "processes": [p.to_state() for p in self.processes],
            **extra,
        }
        path = self.workdir / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(path)

    def _bin(self, tool: str) -> str:
        return str(self.bin_dir / tool)

    def _start_etcd(self) -> str:
        client_port, peer_port = processes.free_port(), processes.free_port()
        client = f"http://127.0.0.1:{client_port}"
        peer = f"http://127.0.0.1:{peer_port}"
        proc = self._spawn(
            "etcd",
            [
                self._bin("etcd"),
                "--name=e2e",
                f"--data-dir={self.workdir / 'etcd-data'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=e2e={peer}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        processes.wait_until(
            processes.http_ok(f"{client}/health"),
            what="etcd /health",
            timeout=self.startup_timeout,
            process=proc,
        )
        return client

    def _start_apiserver(self, pki: Pki, etcd_url: str) -> str:
        port = processes.free_port()
        server = f"https://127.0.0.1:{port}"
        proc = self._spawn(
            "kube-apiserver",
            [
                self._bin("kube-apiserver"),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                f"--tls-cert-file={pki.serving.cert}",
                f"--tls-private-key-file={pki.serving.key}",
                f"--client-ca-file={pki.ca.cert}",
                "--authorization-mode=RBAC",
                "--anonymous-auth=false",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki.service_account.public_key}",
                f"--service-account-signing-key-file={pki.service_account.private_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--allow-privileged=true",
                # The "kubernetes" Endpoints object rejects loopback addresses; nothing in a
                # kwok pod dials the service anyway.
                "--endpoint-reconciler-type=none",
                "--profiling=false",
                # A real node's kubelet (e2e.harness.realnode) serves with a certificate from
                # the same CA; logs and exec reach it authenticated, on loopback.
                f"--kubelet-client-certificate={pki.clients['apiserver-kubelet-client'].cert}",
                f"--kubelet-client-key={pki.clients['apiserver-kubelet-client'].key}",
                f"--kubelet-certificate-authority={pki.ca.cert}",
            ],
        )
        admin = pki.clients["admin"]
        ctx = ssl.create_default_context(cafile=str(pki.ca.cert))
        ctx.load_cert_chain(str(admin.cert), str(admin.key))
        processes.wait_until(
            processes.https_ok(f"{server}/readyz", ctx),
            what="kube-apiserver /readyz",
            timeout=self.startup_timeout,
            process=proc,
        )
        return server

    def _component_serving(self, name: str, kubeconfig: Path) -> tuple[list[str], str]:
        """Flags shared by controller-manager and scheduler, and their /healthz URL."""
        port = processes.free_port()
        flags = [
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.workdir / (name + '-certs')}",
        ]
        return flags, f"https://127.0.0.1:{port}/healthz"

    @staticmethod
    def _unverified() -> ssl.SSLContext:
        # The components' serving certs are self-signed in their --cert-dir; /healthz only.
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx

    def _start_controller_manager(self, pki: Pki, kubeconfig: Path) -> None:
        flags, health = self._component_serving("kube-controller-manager", kubeconfig)
        proc = self._spawn(
            "kube-controller-manager",
            [
                self._bin("kube-controller-manager"),
                *flags,
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={pki.service_account.private_key}",
                f"--root-ca-file={pki.ca.cert}",
                f"--cluster-signing-cert-file={pki.ca.cert}",
                f"--cluster-signing-key-file={pki.ca.key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
            ],
        )
        processes.wait_until(
            processes.https_ok(health, self._unverified()),
            what="kube-controller-manager /healthz",
            timeout=self.startup_timeout,
            process=proc,
        )

    def _start_scheduler(self, kubeconfig: Path) -> None:
        flags, health = self._component_serving("kube-scheduler", kubeconfig)
        proc = self._spawn("kube-scheduler", [self._bin("kube-scheduler"), *flags])
        processes.wait_until(
            processes.https_ok(health, self._unverified()),
            what="kube-scheduler /healthz",
            timeout=self.startup_timeout,
            process=proc,
        )

    def _start_kwok(self, kubeconfig: Path) -> None:
        config = self.workdir / "kwok.yaml"
        config.write_text(stages_config())
        port = processes.free_port()
        proc = self._spawn(
            "kwok",
            [
                self._bin("kwok"),
                f"--kubeconfig={kubeconfig}",
                f"--config={config}",
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                f"--server-address=127.0.0.1:{port}",
                "--node-ip=10.0.1.1",
                "--cidr=10.0.2.0/24",
            ],
        )
        processes.wait_until(
            processes.http_ok(f"http://127.0.0.1:{port}/healthz"),
            what="kwok /healthz",
            timeout=self.startup_timeout,
            process=proc,
        )

    def _create_nodes_and_wait(self) -> None:
        from kubernetes import client, config  # heavy import; only when starting a plane

        api = config.new_client_from_config(config_file=str(self.kubeconfig))  # type: ignore[no-untyped-call]
        try:
            # The client's partial stubs model dict bodies and Optional fields poorly.
            core: Any = client.CoreV1Api(api)
            names = [f"kwok-node-{i}" for i in range(self.nodes)]
            for name in names:
                core.create_node(fake_node(name))

            def nodes_ready() -> bool:
                ready = 0
                for node in core.list_node(label_selector="type=kwok").items:
                    conds = node.status.conditions or []
                    ready += any(c.type == "Ready" and c.status == "True" for c in conds)
                return ready == len(names)

            def default_service_account() -> bool:
                # Pods are refused until the controller-manager has made this account.
                sas = core.list_namespaced_service_account("default").items
                return any(sa.metadata.name == "default" for sa in sas)

            kwok = next(p for p in self.processes if p.name == "kwok")
            kcm = next(p for p in self.processes if p.name == "kube-controller-manager")
            processes.wait_until(
                nodes_ready, what="kwok nodes Ready", timeout=self.startup_timeout, process=kwok
            )
            processes.wait_until(
                default_service_account,
                what="the default service account",
                timeout=self.startup_timeout,
                process=kcm,
            )
        finally:
            api.close()


def stop_from_state(workdir: Path) -> list[str]:
    """Stop what a ``ControlPlane`` in another process started; returns the names stopped."""
    path = workdir / STATE_FILE
    if not path.exists():
        return []
    state = json.loads(path.read_text())
    procs = [Process.from_state(p) for p in state.get("processes", [])]
    stopped = []
    for proc in reversed(procs):
        if proc.running():
            stopped.append(proc.name)
        proc.stop()
    path.unlink(missing_ok=True)
    shutil.rmtree(workdir / "etcd-data", ignore_errors=True)
    return stopped


def read_state(workdir: Path) -> dict[str, Any] | None:
    """The state of a running plane in ``workdir``, or None."""
    path = workdir / STATE_FILE
    if not path.exists():
        return None
    state: dict[str, Any] = json.loads(path.read_text())
    return state
