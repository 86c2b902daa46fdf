"""Webhook intake: throughput and latency to run created, under a loopback load generator.

Serves ``hooks_router`` with uvicorn on 127.0.0.1 in a child process, then POSTs signed JSON
deliveries from N concurrent clients for a fixed count. Each 202 carries the id of the run it
created, so the latency measured is request to run created (committed). Prints deliveries/s
and p50/p99.

    uv run python bench/webhook_intake.py [--requests 2000] [--clients 16]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from dirigent.engine import Engine, EngineSettings
from dirigent.engine.infrastructure.embedded import EmbeddedPostgres
from dirigent.engine.shapes.manifests.loading import parse_manifest, read_text
from dirigent.engine.store.schema.database import create_database, upgrade_async

KEY = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
TOKEN = "bench-token-" + "0123456789abcdef" * 2
SECRET = "bench-hmac"
PIPELINE = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: ingest}
spec:
  params: {type: object, properties: {order: {type: integer}}}
  steps:
    a: {block: testing.record, config: {path: /dev/null}}
"""
WEBHOOK = """
apiVersion: dirigent.dev/v1alpha1
kind: Webhook
metadata: {name: orders}
spec:
  pipeline: ingest
  paramsFromPayload: {order: $.order.id}
  hmacSecretRef: {name: orders, key: hmac}
"""
SERVE = """
import asyncio, sys, uvicorn
from fastapi import FastAPI
from dirigent.api.routes.hooks import hooks_router
from dirigent.engine import Engine, EngineSettings

async def main() -> None:
    async with Engine.open(EngineSettings(), pool_size=16) as engine:
        app = FastAPI()
        app.include_router(hooks_router(engine))
        config = uvicorn.Config(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
        await uvicorn.Server(config).serve()

asyncio.run(main())
"""


def manifest(text: str):  # type: ignore[no-untyped-def]
    docs, _ = read_text(text)
    found, problems = parse_manifest(docs[0].data)
    assert found is not None, problems
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def load(base: str, total: int, clients: int) -> list[float]:
    latencies: list[float] = []
    counter = iter(range(total))

    async def client() -> None:
        async with httpx.AsyncClient(base_url=base, timeout=60) as c:
            for i in counter:
                body = json.dumps({"order": {"id": i}}).encode()
                sig = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
                started = time.perf_counter()
                answer = await c.post(
                    f"/hooks/{TOKEN}", content=body, headers={"X-Dirigent-Signature": sig}
                )
                latencies.append(time.perf_counter() - started)
                assert answer.status_code == 202, answer.text

    await asyncio.gather(*(client() for _ in range(clients)))
    return latencies


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=16)
    args = parser.parse_args()
    base_dir = Path(tempfile.mkdtemp(prefix="dirigent-bench-"))
    server = EmbeddedPostgres(base_dir / "pgdata")
    server.start()
    proc = None
    try:
        await create_database(server.url, "bench")
        url = server.url_for("bench")
        await upgrade_async(url)
        env = {
            **os.environ,
            "DIRIGENT_DATABASE_URL": url,
            "DIRIGENT_SECRET_KEY": KEY,
            "DIRIGENT_ARTIFACT_ROOT": str(base_dir / "a"),
        }
        settings = EngineSettings(database_url=url, secret_key=KEY, metrics_port=None)  # type: ignore[arg-type]
        async with Engine.open(settings) as engine:
            await engine.manifests.apply(manifest(PIPELINE), "default")
            await engine.manifests.apply(
                manifest(WEBHOOK), "default", secret_values={"token": TOKEN, "hmacSecret": SECRET}
            )
        port = free_port()
        proc = await asyncio.to_thread(
            subprocess.Popen, [sys.executable, "-c", SERVE, str(port)], env=env
        )
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient() as probe:
            while True:
                try:
                    await probe.get(base + "/docs", timeout=1)
                    break
                except httpx.HTTPError:
                    await asyncio.sleep(0.2)
        await load(base, 100, args.clients)  # warm-up
        started = time.perf_counter()
        latencies = sorted(await load(base, args.requests, args.clients))
        took = time.perf_counter() - started
        p = lambda q: latencies[min(len(latencies) - 1, int(len(latencies) * q))] * 1000  # noqa: E731
        print(
            f"{args.requests} signed deliveries, {args.clients} clients: {args.requests / took:.0f}/s; "
            f"latency to run created p50 {p(0.5):.1f} ms, p99 {p(0.99):.1f} ms"
        )
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
        server.stop()


if __name__ == "__main__":
    asyncio.run(main())
