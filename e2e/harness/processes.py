"""Start, health-check and stop the control plane's child processes.

Why: every component is a long-running binary whose failure shows only in its log; this
module owns the rules that keep them from leaking: each runs in its own session (a
terminal's Ctrl-C reaches only the Python parent, which then stops them in order), may be
tied to the parent's life with PR_SET_PDEATHSIG (so a SIGKILLed pytest leaves nothing
behind), and is stopped by pid only after checking the pid still runs the same binary.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support import waiting

_PR_SET_PDEATHSIG = 1


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: ask the kernel for SIGTERM when the parent dies.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def log_tail(path: Path, lines: int = 40) -> str:
    """The last lines of a log, for error messages."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:])


@dataclass
class Process:
    """A started component: its pid, binary and log, plus the Popen when we are its parent."""

    name: str
    pid: int
    exe: str
    log: Path
    popen: subprocess.Popen[bytes] | None = None

    def running(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return _pid_runs(self.pid, self.exe)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; never signals a recycled pid."""
        if self.popen is not None:
            if self.popen.poll() is None:
                self.popen.terminate()
                try:
                    self.popen.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.popen.kill()
                    self.popen.wait(timeout)
            return
        if not _pid_runs(self.pid, self.exe):
            return
        os.kill(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _pid_runs(self.pid, self.exe):
                return
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)

    def to_state(self) -> dict[str, object]:
        return {"name": self.name, "pid": self.pid, "exe": self.exe, "log": str(self.log)}

    @classmethod
    def from_state(cls, state: dict[str, object]) -> Process:
        pid = state["pid"]
        assert isinstance(pid, int)
        return cls(
            name=str(state["name"]), pid=pid, exe=str(state["exe"]), log=Path(str(state["log"]))
        )


def _pid_runs(pid: int, exe: str) -> bool:
    """True when ``pid`` is alive (not a zombie) and its argv[0] is ``exe``."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    state = stat.rsplit(")", 1)[-1].split()[0]
    return state not in ("Z", "X") and cmdline.split(b"\0", 1)[0].decode() == exe


def start(
    name: str,
    argv: Sequence[str],
    log_dir: Path,
    *,
    tie_to_parent: bool,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Process:
    """Start ``argv`` with stdout and stderr appended to ``log_dir/<name>.log``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{name}.log"
    with log.open("ab") as out:
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent if tie_to_parent else None,
            env=env,
            cwd=cwd,
        )
    return Process(name=name, pid=popen.pid, exe=argv[0], log=log, popen=popen)


def wait_until(
    check: Callable[[], bool],
    *,
    what: str,
    timeout: float,
    process: Process | None = None,
    interval: float = 0.2,
) -> None:
    """Poll ``check`` until true (``tests.support.waiting.wait_until``, the one waiting
    helper); fail fast with the log tail if ``process`` dies, and name it on a timeout."""

    def checked() -> bool:
        if process is not None and not process.running():
            raise RuntimeError(
                f"{process.name} exited while waiting for {what}; log {process.log}:\n"
                f"{log_tail(process.log)}"
            )
        return check()

    try:
        waiting.wait_until(checked, what=what, timeout=timeout, every=interval)
    except waiting.WaitTimedOut as timed_out:
        if process is None:
            raise
        raise waiting.WaitTimedOut(
            f"{what} (log {process.log}:\n{log_tail(process.log)}\n)",
            timed_out.timeout,
            timed_out.last,
            timed_out.tries,
        ) from None


def https_ok(url: str, context: ssl.SSLContext) -> Callable[[], bool]:
    """A check that GETs ``url`` and is true on HTTP 200."""

    def check() -> bool:
        try:
            with urllib.request.urlopen(url, context=context, timeout=2) as resp:
                return int(resp.status) == 200
        except (urllib.error.URLError, ConnectionError, TimeoutError, ssl.SSLError):
            return False

    return check


def http_ok(url: str) -> Callable[[], bool]:
    """A check that GETs plain-HTTP ``url`` and is true on HTTP 200."""

    def check() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                return int(resp.status) == 200
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    return check
