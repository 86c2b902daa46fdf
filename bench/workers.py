"""What every benchmark shares: an engine door, applying a manifest, real `dirigent worker` processes.

Benchmarks drive the engine through ``Engine`` like every other process; they read timings
from the rows afterwards with plain queries, as tests do their assertions.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg

from dirigent.engine import Engine, EngineSettings
from dirigent.engine.shapes.manifests.loading import parse_manifest, read_text

# The many-small-runs shape of the throughput and scale benches: two no-op steps in a row.
PAIR = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: pair}
spec:
  steps:
    a: {block: core.noop}
    b: {block: core.noop, dependsOn: [a]}
"""


@contextlib.asynccontextmanager
async def door(url: str, pool_size: int = 4, **more: Any) -> AsyncIterator[Engine]:
    """The engine's door on a bench database (migrated beforehand); ``more`` are further
    EngineSettings fields (e.g. ``enabled_unsafe_blocks``)."""
    settings = EngineSettings(database_url=url, metrics_port=None, **more)
    async with Engine.open(settings, pool_size=pool_size) as engine:
        yield engine


async def apply(engine: Engine, text: str) -> None:
    """Apply one manifest through the same path every door uses."""
    docs, _ = read_text(text)
    manifest, problems = parse_manifest(docs[0].data)
    assert manifest is not None, problems
    await engine.manifests.apply(manifest, "default")


def start_workers(
    url: str, count: int, concurrency: int, root: Path, *, poll_interval: float = 0.5
) -> list[subprocess.Popen[bytes]]:
    env = {
        **os.environ,
        "DIRIGENT_DATABASE_URL": url,
        "DIRIGENT_WORKER_CONCURRENCY": str(concurrency),
        "DIRIGENT_ARTIFACT_ROOT": str(root),
        "DIRIGENT_METRICS_PORT": "0",
        "DIRIGENT_POLL_INTERVAL": str(poll_interval),
    }
    return [
        subprocess.Popen(
            [sys.executable, "-m", "dirigent.cli", "worker"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(count)
    ]


def stop_workers(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()


async def wait_registered(pool: asyncpg.Pool, count: int) -> None:
    while await pool.fetchval("SELECT count(*) FROM workers WHERE status = 'active'") < count:
        await asyncio.sleep(0.1)
