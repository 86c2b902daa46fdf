"""``dirigent dev`` as a script drives it: a real subprocess on a real port, its NDJSON
records read line by line (``Dev.expect`` waits for one, with a deadline)."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.waiting import WaitTimedOut, wait_until

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
Record = dict[str, Any]


class Dev:
    """A running ``dirigent dev``; ``expect`` waits for a record with a deadline."""

    def __init__(self, folder: Path, state: Path, port: int, token: str, *extra: str) -> None:
        self.port = port
        command = [sys.executable, "-m", "dirigent.cli", "dev", str(folder), "--state", str(state)]
        command += ["--port", str(port), "--token", token, "--output", "json", *extra]
        env = {k: v for k, v in os.environ.items() if not k.startswith("DIRIGENT_")}
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=folder.parent,
            env=env,
        )
        self.records: queue.Queue[Record] = queue.Queue()
        self.seen: list[Record] = []
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.records.put(json.loads(line))

    def _read_err(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line)

    def expect(self, match: Callable[[Record], bool], timeout: float = 120.0) -> Record:
        """The next record ``match`` accepts; the records after it stay for the next call."""

        def next_match() -> Record | None:
            while True:
                try:
                    record = self.records.get_nowait()
                except queue.Empty:
                    return None
                self.seen.append(record)
                if match(record):
                    return record

        try:
            found = wait_until(next_match, timeout=timeout, every=0.02, what="a matching record")
        except WaitTimedOut as timed_out:
            raise AssertionError(
                f"{timed_out}; seen {self.seen}; stderr {''.join(self.stderr)}"
            ) from None
        assert found is not None
        return found

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=60)


@pytest.fixture
def state() -> Iterator[Path]:
    """The state folder, outside pytest's tree: that is 0700 and reset by every pytest session
    (other processes' too), and the embedded server runs as an unprivileged user when we are
    root, so it must be able to reach its data for the whole test."""
    outside = Path(tempfile.mkdtemp(prefix="dirigent-dev-test-"))
    outside.chmod(0o755)
    yield outside / ".dirigent"
    shutil.rmtree(outside, ignore_errors=True)
