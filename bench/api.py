"""REST API latency: run detail of a 10,000-item fan-out, listing 1,000 pipelines, and one run
followed by 100 SSE clients at once.

Everything is real: an embedded PostgreSQL, a `dirigent api` process (uvicorn, static token)
and `dirigent worker` processes; requests cross loopback TCP from this process, one at a
time for latencies (so a figure is the server's answer time plus loopback, not queueing).

    uv run python bench/api.py            # 10,000 items, 1,000 pipelines, 100 followers
    uv run python bench/api.py --quick    # small sizes, to check the script works
    uv run python bench/api.py --only detail --only followers   # some parts only

Target (ARCHITECTURE): run detail of a 10,000-item fan-out answers in under 50 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from workers import start_workers, stop_workers

from dirigent.api.client import Client
from dirigent.engine import Engine, EngineSettings, RunRequest
from dirigent.engine.infrastructure.embedded import EmbeddedPostgres
from dirigent.engine.shapes.manifests.loading import parse_manifest
from dirigent.engine.store.schema.database import create_database, upgrade_async

TOKEN = "bench-token-0123456789abcdef"
NS = "default"


def pipeline(name: str, steps: dict[str, Any], params: dict[str, Any] | None = None) -> Any:
    spec: dict[str, Any] = {"steps": steps}
    if params:
        spec["params"] = params
    doc = {"apiVersion": "dirigent.dev/v1alpha1", "kind": "Pipeline", "metadata": {"name": name}}
    manifest, problems = parse_manifest({**doc, "spec": spec})
    assert manifest is not None, problems
    return manifest


FAN = pipeline(
    "fan",
    {"each": {"block": "core.noop", "forEach": "${params.items}"}},
    {"type": "object", "properties": {"items": {"type": "array"}}},
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_api(url: str, root: Path, port: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DIRIGENT_DATABASE_URL": url,
        "DIRIGENT_ARTIFACT_ROOT": str(root),
        "DIRIGENT_METRICS_PORT": "0",
        "DIRIGENT_API_TOKEN": TOKEN,
        "DIRIGENT_LOG_FORMAT": "json",
    }
    command = [sys.executable, "-m", "dirigent.cli", "api", "--auth", "static"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--streams-per-principal", "1000"]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def wait_ready(base: str) -> None:
    async with httpx.AsyncClient(base_url=base) as http:
        for _ in range(600):
            try:
                if (await http.get("/health/ready")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise TimeoutError("dirigent api did not become ready")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def timed(call: Callable[[], Awaitable[Any]], n: int) -> tuple[float, float]:
    """p50, p95 in ms over n sequential calls (after 3 warm-up calls)."""
    for _ in range(3):
        await call()
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    return statistics.median(samples), samples[min(n - 1, int(n * 0.95))]


async def until_finished(engine: Engine, run_id: int) -> str:
    while (status := await engine.runs.status(NS, run_id)) in ("queued", "running"):
        await asyncio.sleep(0.1)
    return status or "unknown"


async def run_detail(engine: Engine, api: Client, url: str, root: Path, items: int) -> None:
    await engine.manifests.apply(FAN, NS)
    t0 = time.perf_counter()
    run = await engine.runs.start(RunRequest(NS, "fan", {"items": list(range(items))}))
    print(f"created a {items}-item fan-out run in {time.perf_counter() - t0:.2f}s", flush=True)
    p50, p95 = await timed(lambda: api.get_run(NS, run.run_id), 200)
    print(f"run detail, {items} items queued:    p50 {p50:.1f} ms  p95 {p95:.1f} ms", flush=True)
    workers = start_workers(url, 2, 16, root)
    try:
        t0 = time.perf_counter()
        assert await until_finished(engine, run.run_id) == "succeeded"
        print(f"  (2 workers ran it in {time.perf_counter() - t0:.1f}s)", flush=True)
    finally:
        stop_workers(workers)
    p50, p95 = await timed(lambda: api.get_run(NS, run.run_id), 200)
    print(f"run detail, {items} items finished:   p50 {p50:.1f} ms  p95 {p95:.1f} ms", flush=True)
    page = lambda: api.list_items(NS, run.run_id, "each", limit=500)  # noqa: E731
    p50, p95 = await timed(page, 100)
    print(f"items page of 500 of {items}:        p50 {p50:.1f} ms  p95 {p95:.1f} ms", flush=True)


async def listing(engine: Engine, api: Client, count: int) -> None:
    noop = {"only": {"block": "core.noop"}}
    t0 = time.perf_counter()
    for i in range(count):
        await engine.manifests.apply(pipeline(f"p{i:04d}", noop), NS)
        if i % 3 == 0:  # a third have a run, so the newest-run lookup has work to do
            await engine.runs.start(RunRequest(NS, f"p{i:04d}"))
    print(f"applied {count} pipelines in {time.perf_counter() - t0:.1f}s", flush=True)
    for limit in (50, 500):

        async def page(limit: int = limit) -> None:
            await api.list_pipelines(NS, limit=limit)

        p50, p95 = await timed(page, 100)
        print(f"pipelines listing, limit {limit}:   p50 {p50:.1f} ms  p95 {p95:.1f} ms", flush=True)

    async def walk() -> None:
        after = None
        while True:
            page = await api.list_pipelines(NS, limit=100, after=after)
            if page.next is None:
                return
            after = page.next

    p50, p95 = await timed(walk, 20)
    print(f"all {count} by pages of 100:      p50 {p50:.1f} ms  p95 {p95:.1f} ms", flush=True)


async def followers(
    engine: Engine, base: str, url: str, root: Path, api_pid: int, n: int, items: int
) -> None:
    await engine.manifests.apply(FAN, NS)
    run = await engine.runs.start(RunRequest(NS, "fan", {"items": list(range(items))}))
    ended: list[float] = []
    counts: list[int] = []

    async def follow() -> None:
        async with Client(base, TOKEN, timeout=60) as client:
            seen = 0
            async for event in client.watch(NS, run.run_id):
                seen += 1
                if event.event == "end":
                    ended.append(time.perf_counter())
            counts.append(seen)

    cpu0, own0 = cpu_seconds(api_pid), time.process_time()
    tasks = [asyncio.create_task(follow()) for _ in range(n)]
    await asyncio.sleep(1)  # let every follower connect before the work starts
    workers = start_workers(url, 2, 16, root)
    try:
        t0 = time.perf_counter()
        assert await until_finished(engine, run.run_id) == "succeeded"
        finished = time.perf_counter()
        await asyncio.gather(*tasks)
    finally:
        stop_workers(workers)
    lags = sorted((t - finished) * 1000 for t in ended)
    print(
        f"{n} followers of one {items}-item run: every follower got {set(counts)} events; "
        f"run took {finished - t0:.1f}s; end seen after finish p50 {statistics.median(lags):.0f} ms "
        f"max {lags[-1]:.0f} ms; API CPU {cpu_seconds(api_pid) - cpu0:.1f}s, "
        f"followers' (this process's) CPU {time.process_time() - own0:.1f}s",
        flush=True,
    )


PARTS = ("detail", "listing", "followers")


async def main(quick: bool, parts: set[str]) -> None:
    items, count, n = (500, 50, 10) if quick else (10_000, 1_000, 100)
    base_dir = Path(tempfile.mkdtemp(prefix="dirigent-bench-api-"))
    with EmbeddedPostgres(base_dir / "pg") as server:
        await create_database(server.url, "bench")
        url = server.url_for("bench")
        await upgrade_async(url)
        root = base_dir / "artifacts"
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        api_process = start_api(url, root, port)
        settings = EngineSettings(database_url=url, artifact_root=root, metrics_port=None)
        try:
            await wait_ready(base)
            async with Engine.open(settings) as engine, Client(base, TOKEN, timeout=60) as api:
                if "detail" in parts:
                    await run_detail(engine, api, url, root, items)
                if "listing" in parts:
                    await listing(engine, api, count)
                if "followers" in parts:
                    for many in (1, n):  # one follower first: the same run size's baseline
                        await followers(engine, base, url, root, api_process.pid, many, items // 10)
        finally:
            api_process.send_signal(signal.SIGTERM)
            api_process.wait(timeout=30)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--only", choices=PARTS, action="append", help="measure only these parts (repeatable)"
    )
    args = parser.parse_args()
    asyncio.run(main(args.quick, set(args.only or PARTS)))
