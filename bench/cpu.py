"""CPU time and context switches per attempt, for the workers and for the server, from /proc.

Throughput alone cannot tell an engine that does more work per attempt from a machine that
does the same work more slowly. Counting both sides' CPU (user and system apart) and their
context switches per attempt can: with more workers than cores, the same statements cost
more user time when more processes take turns on the cores, and a server that is still
creating its files or touching fresh memory shows up as system time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Usage:
    """Totals over a set of processes: CPU seconds and context switches."""

    user: float = 0.0
    system: float = 0.0
    voluntary: int = 0
    involuntary: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.user + other.user,
            self.system + other.system,
            self.voluntary + other.voluntary,
            self.involuntary + other.involuntary,
        )

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            self.user - other.user,
            self.system - other.system,
            self.voluntary - other.voluntary,
            self.involuntary - other.involuntary,
        )


def process_usage(pid: int) -> Usage:
    """One process's usage; nothing for a process that has gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
    except (FileNotFoundError, ProcessLookupError):
        return Usage()
    switches = {k: int(v) for k, _, v in (line.partition(":") for line in status) if "ctxt" in k}
    return Usage(
        int(fields[11]) / TICK,
        int(fields[12]) / TICK,
        switches.get("voluntary_ctxt_switches", 0),
        switches.get("nonvoluntary_ctxt_switches", 0),
    )


def server_pids(data_dir: Path) -> list[int]:
    """The postmaster (first line of its pid file) and every process it started."""
    postmaster = int((data_dir / "postmaster.pid").read_text().splitlines()[0])
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue
        if ppid == postmaster:
            children.append(int(stat.parent.name))
    return [postmaster, *children]


@dataclass(frozen=True)
class Snapshot:
    """Usage per process at one moment: a process that starts later counts from zero."""

    workers: dict[int, Usage]
    server: dict[int, Usage]


def snapshot(worker_pids: list[int], data_dir: Path) -> Snapshot:
    return Snapshot(
        {pid: process_usage(pid) for pid in worker_pids},
        {pid: process_usage(pid) for pid in server_pids(data_dir)},
    )


def _spent(before: dict[int, Usage], after: dict[int, Usage]) -> Usage:
    total = Usage()
    for pid, usage in after.items():
        total += usage - before.get(pid, Usage())
    return total


def per_attempt(before: Snapshot, after: Snapshot, attempts: int) -> str:
    """One line: µs of CPU and context switches per attempt, workers and server apart."""
    parts = []
    for name, spent in (
        ("workers", _spent(before.workers, after.workers)),
        ("server", _spent(before.server, after.server)),
    ):
        parts.append(
            f"{name} user {spent.user / attempts * 1e6:.0f} sys {spent.system / attempts * 1e6:.0f}"
            f" us, switches {spent.voluntary / attempts:.2f}+{spent.involuntary / attempts:.2f}"
        )
    return "  cpu per attempt: " + "; ".join(parts) + " (voluntary+involuntary)"
