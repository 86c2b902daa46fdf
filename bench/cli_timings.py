"""The command's own latency: ``dirigent run examples/linear.yaml --local`` and ``dirigent dev``.

- run --local, cold: a fresh bytecode cache (``PYTHONPYCACHEPREFIX`` in an empty folder), so
  every module is compiled, as on the first run after an install (each run also makes a
  fresh embedded database: initdb, start, migrations);
- run --local, warm: the same command again, caches in place (median of ``--repeat``);
- dev, first start: an empty state folder (initdb, migrations, the folder applied) until the
  ``ready`` record, and until the API answers ``/health`` when the API is in this build;
- dev, restart: the same state folder again (the database kept, nothing to create).

    uv run python bench/cli_timings.py [--repeat 3]

Each figure is wall-clock seconds; the machine's load is printed beside them because this
machine's two cores are shared.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMAND = [sys.executable, "-m", "dirigent.cli"]


def timed_run(env: dict[str, str]) -> float:
    began = time.perf_counter()
    done = subprocess.run(
        [*COMMAND, "run", "examples/linear.yaml", "--local", "-o", "json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"run failed ({done.returncode}): {done.stderr}")
    return took


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def timed_dev(state: Path, env: dict[str, str]) -> tuple[float, float | None]:
    """Seconds to the ready record, and to /health answering (None without an API)."""
    port = free_port()
    began = time.perf_counter()
    process = subprocess.Popen(
        [*COMMAND, "dev", "examples", "--state", str(state), "--port", str(port), "-o", "json"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    try:
        ready = None
        for line in process.stdout:
            if json.loads(line)["kind"] == "ready":
                ready = time.perf_counter() - began
                break
        if ready is None:
            raise SystemExit("dev exited before it was ready")
        health = f"http://127.0.0.1:{port}/health"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if answers(health):
                return ready, time.perf_counter() - began
            time.sleep(0.01)
        return ready, None
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        # Bytecode is written (some shells here set PYTHONDONTWRITEBYTECODE, which would make
        # every run a cold one) into a fresh prefix, so the first run compiles everything.
        cold_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cold_env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        print(f"load average before: {os.getloadavg()[0]:.2f}")
        cold = timed_run(cold_env)
        warm = statistics.median(timed_run(cold_env) for _ in range(args.repeat))
        print(
            f"run --local linear.yaml: cold {cold:.2f}s, warm {warm:.2f}s (median of {args.repeat})"
        )
        state = Path(tmp) / "state"
        first, first_api = timed_dev(state, cold_env)
        again, again_api = timed_dev(state, cold_env)
        api = (
            f"; API answering: first {first_api:.2f}s, restart {again_api:.2f}s"
            if first_api is not None and again_api is not None
            else "; API: not in this build"
        )
        print(f"dev examples/ to ready: first start {first:.2f}s, restart {again:.2f}s{api}")
        print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
