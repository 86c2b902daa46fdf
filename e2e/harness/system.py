"""dirigent's own processes against a cluster: an embedded PostgreSQL, operators and a worker.

Why: the operator must be proven as a real process against a real apiserver, and people
trying the Kubernetes face need the same thing without Docker (``make demo-up``). One
``System`` serves both: the e2e fixtures hold it in the pytest process (children tied to
it), and ``python -m e2e.harness demo-up`` runs it in a detached supervisor
(``e2e.harness.demo``) that outlives the shell.

Invariants:
- the database is migrated before any dirigent process starts (the engine refuses a schema
  not at head);
- every operator gets its own admission port, metrics port and identity, so a standby can
  run beside the leader on one machine;
- the CRDs from ``crds/`` are installed and Established before the first operator starts.
"""

from __future__ import annotations

import base64
import os
import secrets
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.harness import processes
from e2e.harness.binaries import REPO_ROOT
from e2e.harness.processes import Process

DIRIGENT = str(Path(sys.executable).parent / "dirigent")
LEASE_SECONDS = "3"
WEBHOOK_CONFIGURATION = "dirigent.dev"


def install_crds(kubeconfig: Path) -> None:
    """Apply every CRD in crds/ and wait until each is Established."""
    kubectl = os.environ.get("DIRIGENT_KUBECTL", "kubectl")
    base = [kubectl, f"--kubeconfig={kubeconfig}"]
    subprocess.run([*base, "apply", "-f", str(REPO_ROOT / "crds")], check=True, capture_output=True)
    subprocess.run(
        [
            *base,
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "-f",
            str(REPO_ROOT / "crds"),
        ],
        check=True,
        capture_output=True,
    )


@dataclass
class System:
    """Start with ``start()``; add operators with ``start_operator``; stop with ``stop()``."""

    kubeconfig: Path
    workdir: Path
    tie_to_parent: bool = True
    database_url: str = ""
    secret_key: str = field(
        default_factory=lambda: base64.b64encode(secrets.token_bytes(32)).decode()
    )
    operators: list[Process] = field(default_factory=list)
    metrics_ports: dict[str, int] = field(default_factory=dict)
    worker: Process | None = None
    _envs: dict[str, dict[str, str]] = field(default_factory=dict)
    _postgres: Any = None
    _count: int = 0

    @property
    def log_dir(self) -> Path:
        return self.workdir / "logs"

    def start(self, *, worker: bool = True, operator: bool = True) -> System:
        from dirigent.engine.infrastructure.embedded import EmbeddedPostgres
        from dirigent.engine.store.schema.database import upgrade

        self.workdir.mkdir(parents=True, exist_ok=True)
        self._postgres = EmbeddedPostgres(self.workdir / "pgdata")
        self._postgres.start()
        self.database_url = self._postgres.url
        upgrade(self.database_url, "head")
        install_crds(self.kubeconfig)
        if worker:
            self.start_worker()
        if operator:
            self.start_operator()
        return self

    def env(self, **extra: str) -> dict[str, str]:
        """The environment every dirigent process of this system runs with."""
        return {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "DIRIGENT_DATABASE_URL": self.database_url,
            "DIRIGENT_SECRET_KEY": self.secret_key,
            "DIRIGENT_ARTIFACT_ROOT": str(self.workdir / "artifacts"),
            "DIRIGENT_METRICS_PORT": "0",
            "DIRIGENT_POLL_INTERVAL": "0.2",
            # An alert that cannot be delivered gives up in seconds, not minutes.
            "DIRIGENT_NOTIFICATION_BACKOFF": "200ms",
            "PYTHONUNBUFFERED": "1",
            **extra,
        }

    def start_worker(self) -> Process:
        self.worker = processes.start(
            "worker",
            [DIRIGENT, "worker"],
            self.log_dir,
            tie_to_parent=self.tie_to_parent,
            env=self.env(),
        )
        return self.worker

    def start_operator(self, *, admission: bool = True, wait: bool = True, **env: str) -> Process:
        """A new operator process; with ``wait``, returns once it leads and serves."""
        self._count += 1
        name = f"operator-{self._count}"
        metrics_port = processes.free_port()
        settings = {
            "DIRIGENT_METRICS_PORT": str(metrics_port),
            "DIRIGENT_OPERATOR_IDENTITY": name,
            "DIRIGENT_OPERATOR_ADMISSION": "true" if admission else "false",
            "DIRIGENT_OPERATOR_ADMISSION_PORT": str(processes.free_port()),
            "DIRIGENT_OPERATOR_ADMISSION_CERT_DIR": str(self.workdir / name / "certs"),
            "DIRIGENT_OPERATOR_LEASE_SECONDS": LEASE_SECONDS,
            "DIRIGENT_OPERATOR_RENEW_SECONDS": "1",
            "DIRIGENT_OPERATOR_RESYNC_SECONDS": "10",
            **env,
        }
        self._envs[name] = settings
        proc = processes.start(
            name,
            [DIRIGENT, "operator"],
            self.log_dir,
            tie_to_parent=self.tie_to_parent,
            env=self.env(**settings),
        )
        self.metrics_ports[name] = metrics_port
        self.operators.append(proc)
        if wait:
            self.wait_leading(proc, admission=admission)
        return proc

    def wait_leading(self, proc: Process, *, admission: bool = True, timeout: float = 60) -> None:
        """Until ``proc`` leads and, with admission, the webhook configuration points at it."""
        port = self.env_of(proc).get("DIRIGENT_OPERATOR_ADMISSION_PORT", "")

        def leading() -> bool:
            text = proc.log.read_text(errors="replace") if proc.log.exists() else ""
            if "leading" not in text or "metrics" not in text:
                return False
            return not admission or f":{port}/" in self._webhook_urls()

        processes.wait_until(leading, what=f"{proc.name} leading", timeout=timeout, process=proc)

    def env_of(self, proc: Process) -> dict[str, str]:
        return self._envs.get(proc.name, {})

    def _webhook_urls(self) -> str:
        kubectl = os.environ.get("DIRIGENT_KUBECTL", "kubectl")
        result = subprocess.run(
            [
                kubectl,
                f"--kubeconfig={self.kubeconfig}",
                "get",
                "validatingwebhookconfiguration",
                WEBHOOK_CONFIGURATION,
                "-o",
                "jsonpath={.webhooks[*].clientConfig.url}",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        return result.stdout

    def kill(self, proc: Process) -> None:
        """SIGKILL: no cleanup, no Lease release, as a crash would."""
        if proc.popen is not None and proc.popen.poll() is None:
            proc.popen.kill()
            proc.popen.wait(10)

    def stop(self) -> None:
        for proc in reversed(self.operators):
            proc.stop()
        if self.worker is not None:
            self.worker.stop()
        if self._postgres is not None:
            self._postgres.stop()

    def __enter__(self) -> System:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
