"""storage.copy of a large object: how long it takes, and how much memory the worker holds.

The copy runs as a real step: a one-step pipeline on an embedded PostgreSQL, executed by a
``dirigent worker`` subprocess. The source is written once (random bytes, so nothing is
compressible or sparse); the worker's peak RSS comes from the kernel's accounting of the
finished child (``getrusage(RUSAGE_CHILDREN).ru_maxrss``), so it is the true maximum over
the worker's life, not a sample. An idle worker's peak is measured the same way first, so
the copy's own cost is the difference. A streamed copy holds one chunk: the figure must not
grow with the object.

    uv run python bench/storage_copy.py              # 1 GiB
    uv run python bench/storage_copy.py --size-mb 64 # quick

Last line (machine-readable):
    size_mb=<n> seconds=<t> mb_per_s=<r> worker_peak_rss_mb=<p> idle_worker_peak_rss_mb=<q>
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import resource
import tempfile
import time
from pathlib import Path

import asyncpg
from workers import apply, door, start_workers, stop_workers, wait_registered

from dirigent.engine import RunRequest
from dirigent.engine.infrastructure.embedded import EmbeddedPostgres
from dirigent.engine.store.pool import create_pool
from dirigent.engine.store.schema.database import create_database, upgrade_async


def write_source(path: Path, size_mb: int) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    with path.open("wb") as f:
        for _ in range(size_mb):
            chunk = os.urandom(1 << 20)
            digest.update(chunk)
            f.write(chunk)
    return digest.hexdigest()


def children_peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


async def finish(pool: asyncpg.Pool, run_id: int) -> str:
    while True:
        status = str(await pool.fetchval("SELECT status FROM runs WHERE id = $1", run_id))
        if status in ("succeeded", "failed", "cancelled", "completed_with_errors"):
            return status
        await asyncio.sleep(0.05)


async def main(size_mb: int) -> None:
    base = Path(tempfile.mkdtemp(prefix="dirigent-bench-copy-"))
    root = base / "artifacts"
    own = root / "namespaces" / "default"  # all a step of namespace default reaches
    source = own / "in" / "big.bin"
    digest = write_source(source, size_mb)
    server = EmbeddedPostgres(base / "pgdata")
    server.start()
    try:
        await create_database(server.url, "copy")
        url = server.url_for("copy")
        await upgrade_async(url)
        pool = await create_pool(url, max_size=4)
        # An idle worker first: its peak is the baseline the copy is measured against.
        idle = start_workers(url, 1, 1, root)
        await wait_registered(pool, 1)
        stop_workers(idle)
        idle_peak = children_peak_mb()
        async with door(url) as engine:
            await apply(
                engine,
                f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: copy}}
spec:
  steps:
    copy: {{block: storage.copy, config: {{source: '{source.as_uri()}', target: '{own.as_uri()}/out/big.bin'}}}}
""",
            )
            procs = start_workers(url, 1, 1, root)
            await pool.execute("DELETE FROM workers")
            await wait_registered(pool, 1)
            created = await engine.runs.start(RunRequest("default", "copy", {}))
        started = time.monotonic()
        status = await finish(pool, created.run_id)
        seconds = time.monotonic() - started
        stop_workers(procs)
        peak = children_peak_mb()
        output = await pool.fetchval(
            "SELECT output->>'sha256' FROM step_attempts WHERE run_id = $1", created.run_id
        )
        await pool.close()
        assert status == "succeeded", status
        assert output == digest, "the copy's digest differs from the source's"
        print(f"copied {size_mb} MiB in {seconds:.2f}s ({size_mb / seconds:.0f} MiB/s)")
        print(f"worker peak RSS {peak:.0f} MiB (an idle worker peaks at {idle_peak:.0f} MiB)")
        print(
            f"size_mb={size_mb} seconds={seconds:.2f} mb_per_s={size_mb / seconds:.0f} "
            f"worker_peak_rss_mb={peak:.0f} idle_worker_peak_rss_mb={idle_peak:.0f}"
        )
    finally:
        server.stop()
        import shutil

        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    asyncio.run(main(parser.parse_args().size_mb))
