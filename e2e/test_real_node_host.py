"""The real node's host cleanup, proven on this host's real mounts, cgroups and processes.

Why: a real node that leaks a mount, a cgroup or a shim breaks the next session in ways no
test names; these pieces of ``hoststate`` are what ``RealNode.stop`` relies on.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from e2e.harness import hoststate
from e2e.harness.processes import wait_until

pytestmark = pytest.mark.e2e


def test_unmount_under_unmounts_everything_below_a_root_deepest_first(tmp_path: Path) -> None:
    root, outside = tmp_path / "node", tmp_path / "outside"
    inner = root / "a" / "b"
    for d in (inner, outside):
        d.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(root / "a")], check=True)
    (root / "a" / "b").mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(root / "a" / "b")], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(outside)], check=True)
    try:
        assert hoststate.mounts_under(root) == [str(root / "a" / "b"), str(root / "a")]
        assert hoststate.unmount_under(root) == [str(root / "a" / "b"), str(root / "a")]
        assert hoststate.mounts_under(root) == []
        assert hoststate.mounts_under(outside) == [str(outside)]
    finally:
        hoststate.unmount_under(root, outside)
    assert hoststate.mounts_under(outside) == []


def test_a_cgroup_root_is_made_in_every_hierarchy_and_removed_with_its_children() -> None:
    name = f"dirigent-e2e-{uuid.uuid4().hex[:8]}"
    hoststate.make_cgroup_root(name)
    try:
        made = [c / name for c in hoststate.cgroup_controllers() if (c / name).is_dir()]
        assert made, "no cgroup hierarchy accepted a new directory"
        (made[0] / "kubepods" / "burstable").mkdir(parents=True)
    finally:
        left = hoststate.remove_cgroup_root(name)
    assert left == []
    assert not any((c / name).exists() for c in hoststate.cgroup_hierarchies())


def test_leftover_processes_are_found_by_their_exact_argument_and_stopped() -> None:
    marker = f"/tmp/dirigent-e2e-{uuid.uuid4().hex}.sock"
    code = "import sys, time; time.sleep(600)"
    proc = subprocess.Popen([sys.executable, "-c", code, marker])
    try:
        # Popen returns once the child is forked; its command line is the marker's only
        # once it has exec'd.
        wait_until(
            lambda: hoststate.pids_with_arg(marker) != [],
            what="the child's command line",
            timeout=10,
            interval=0.01,
        )
        assert hoststate.pids_with_arg(marker) == [proc.pid]
        assert hoststate.pids_with_arg(marker[:-5]) == []  # a prefix is not the argument
        hoststate.kill_pids([proc.pid])
        assert proc.wait(timeout=10) != 0
        assert hoststate.pids_with_arg(marker) == []
    finally:
        proc.kill()
