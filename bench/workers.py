"""What every benchmark shares: applying a manifest and running real `dirigent worker` processes."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import asyncpg

from dirigent.engine.applying import apply_manifest
from dirigent.engine.manifests.loading import parse_manifest, read_text
from dirigent.engine.plugins import discover
from dirigent.engine.store.pool import in_transaction


async def apply(pool: asyncpg.Pool, text: str) -> None:
    """Apply one manifest through the same path every door uses."""
    docs, _ = read_text(text)
    manifest, problems = parse_manifest(docs[0].data)
    assert manifest is not None, problems
    catalog = discover()
    await in_transaction(
        pool, lambda c: apply_manifest(c, manifest, namespace="default", catalog=catalog)
    )


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
