"""Host state a real node changes, saved before and put back after.

Why: a kubelet and containerd change the machine beyond their own directories: the kubelet
sets kernel tunables, containerd and the kubelet mount overlay root filesystems, shm and
token volumes, and both make cgroups. A test session must leave the host as it found it,
so every change is undone by path or by pid, never by a broad process name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

# What the kubelet's setupKernelTunables writes unless protectKernelDefaults is set.
KERNEL_SETTINGS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
_SYSCTL = Path("/proc/sys")
_CGROUP = Path("/sys/fs/cgroup")


def read_kernel_settings() -> dict[str, str]:
    """The current values of the settings the kubelet may change."""
    out = {}
    for key in KERNEL_SETTINGS:
        with contextlib.suppress(OSError):
            out[key] = (_SYSCTL / key).read_text().strip()
    return out


def restore_kernel_settings(saved: dict[str, str]) -> dict[str, str]:
    """Write back every saved value that differs now; returns ``{key: "was -> restored"}``."""
    changed = {}
    for key, value in saved.items():
        path = _SYSCTL / key
        try:
            now = path.read_text().strip()
            if now != value:
                path.write_text(value)
                changed[key] = f"{now} -> {value}"
        except OSError:
            continue
    return changed


def mounts_under(*roots: Path) -> list[str]:
    """Mount points below any of ``roots``, deepest first (the order to unmount in)."""
    prefixes = [str(r.resolve()).rstrip("/") + "/" for r in roots]
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if any(point.startswith(p) or point + "/" == p for p in prefixes):
            found.append(point)
    return sorted(set(found), key=lambda p: p.count("/"), reverse=True)


def unmount_under(*roots: Path) -> list[str]:
    """Unmount (lazily if busy) everything mounted below ``roots``; returns what was."""
    done = []
    for point in mounts_under(*roots):
        result = subprocess.run(["umount", point], capture_output=True, check=False)
        if result.returncode != 0:
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)
        done.append(point)
    return done


def cgroup_controllers() -> list[Path]:
    """Each cgroup v1 hierarchy (or the single v2 one) mounted under /sys/fs/cgroup."""
    if (_CGROUP / "cgroup.controllers").exists():
        return [_CGROUP]
    return sorted(
        p for p in _CGROUP.iterdir() if p.is_dir() and not p.is_symlink() and p.name != "unified"
    )


def cgroup_hierarchies() -> list[Path]:
    """``cgroup_controllers()`` plus a hybrid host's cgroup2 mount (``/sys/fs/cgroup/unified``):
    the kubelet and runc make the node's directories there too, so cleanup must look there."""
    unified = _CGROUP / "unified"
    extra = [unified] if (unified / "cgroup.controllers").exists() else []
    return [*cgroup_controllers(), *extra]


def make_cgroup_root(name: str) -> None:
    """``/<name>`` in every hierarchy: the kubelet's cgroupRoot (it must exist)."""
    for ctrl in cgroup_controllers():
        with contextlib.suppress(OSError):
            (ctrl / name).mkdir(exist_ok=True)
            # A new v1 cpuset starts empty and admits no task: inherit the parent's sets.
            for key in ("cpuset.cpus", "cpuset.mems"):
                if (ctrl / key).exists() and not (ctrl / name / key).read_text().strip():
                    (ctrl / name / key).write_text((ctrl / key).read_text())


def remove_cgroup_root(name: str) -> list[str]:
    """rmdir ``/<name>`` and all below it, deepest first; returns those still present."""
    left = []
    for ctrl in cgroup_hierarchies():
        top = ctrl / name
        if not top.is_dir():
            continue
        dirs = sorted(
            (Path(d) for d, _, _ in os.walk(top)), key=lambda p: len(p.parts), reverse=True
        )
        for d in dirs:
            with contextlib.suppress(OSError):
                d.rmdir()
        if top.exists():
            left.append(str(top))
    return left


def pids_with_arg(arg: str) -> list[int]:
    """Processes whose command line contains ``arg`` as one whole argument."""
    needle = arg.encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if needle in argv:
            pids.append(int(entry.name))
    return pids


def kill_pids(pids: list[int], timeout: float = 10.0) -> None:
    """SIGTERM each pid, then SIGKILL those still alive after ``timeout``."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if Path(f"/proc/{p}").exists() and not _zombie(p)]
        time.sleep(0.1)
    for pid in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X")


def pids_in_cgroup_root(name: str) -> list[int]:
    """Every pid in any cgroup below ``/<name>`` (containers a dead runtime left behind)."""
    pids: set[int] = set()
    for ctrl in cgroup_hierarchies():
        for d, _, files in os.walk(ctrl / name):
            if "cgroup.procs" in files:
                with contextlib.suppress(OSError):
                    pids.update(int(p) for p in (Path(d) / "cgroup.procs").read_text().split())
    pids.discard(os.getpid())
    return sorted(pids)
