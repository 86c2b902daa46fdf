"""Scheduler lag: N schedules due in the same minute, fired by one leader.

Applies N cron schedules ("* * * * *") of one pipeline, starts the scheduler through the
engine door, and waits until every schedule fired once. Prints the firing rate and the lag
from the owed slot to the firing (p50, p99, max), read back from ``schedule_firings``.

    uv run python bench/scheduler_lag.py [--schedules 1000] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import asyncpg

from dirigent.engine import Engine, EngineSettings
from dirigent.engine.infrastructure.embedded import EmbeddedPostgres
from dirigent.engine.shapes.manifests.loading import parse_manifest, read_text
from dirigent.engine.store.pool import asyncpg_dsn
from dirigent.engine.store.schema.database import create_database, upgrade_async

PIPELINE = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: tick}
spec:
  steps:
    a: {block: testing.record, config: {path: /dev/null}}
"""


def manifest(text: str):  # type: ignore[no-untyped-def]
    docs, _ = read_text(text)
    found, problems = parse_manifest(docs[0].data)
    assert found is not None, problems
    return found


def pct(values: list[float], p: float) -> float:
    return sorted(values)[min(len(values) - 1, int(len(values) * p))]


async def measure(url: str, root: Path, count: int, concurrency: int) -> None:
    settings = EngineSettings(database_url=url, artifact_root=root, metrics_port=None)
    async with Engine.open(settings, pool_size=concurrency + 4) as engine:
        await engine.manifests.apply(manifest(PIPELINE), "default")
        started = time.perf_counter()
        for i in range(count):
            text = f"""
apiVersion: dirigent.dev/v1alpha1
kind: Schedule
metadata: {{name: s{i}}}
spec: {{pipeline: tick, cron: '* * * * *'}}
"""
            await engine.manifests.apply(manifest(text), "default")
        print(f"applied {count} schedules in {time.perf_counter() - started:.1f}s")
        scheduler = engine.triggers.scheduler(concurrency=concurrency, tick=0.2)
        task = asyncio.create_task(scheduler.run())
        while scheduler.fired < count:
            await asyncio.sleep(0.05)
        scheduler.stop()
        await task
    # The bench reads the firings table itself (the door pages firings per schedule).
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        rows = await conn.fetch(
            "SELECT extract(epoch FROM fired_at - scheduled_for)::float8 AS lag "
            "FROM schedule_firings ORDER BY fired_at"
        )
        first = await conn.fetchval(
            "SELECT extract(epoch FROM max(fired_at) - min(fired_at))::float8 FROM schedule_firings"
        )
    finally:
        await conn.close()
    lags = [r["lag"] for r in rows[:count]]
    print(
        f"{count} firings in {first:.2f}s ({count / max(first, 1e-9):.0f} firings/s, "
        f"concurrency {concurrency}); lag p50 {statistics.median(lags):.2f}s "
        f"p99 {pct(lags, 0.99):.2f}s max {max(lags):.2f}s"
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--schedules", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="dirigent-bench-"))
    server = EmbeddedPostgres(base / "pgdata")
    server.start()
    try:
        await create_database(server.url, "bench")
        url = server.url_for("bench")
        await upgrade_async(url)
        await measure(url, base / "artifacts", args.schedules, args.concurrency)
    finally:
        server.stop()


if __name__ == "__main__":
    asyncio.run(main())
