"""storage.copy between file:// and s3:// on a real S3 server: speed, and a worker's memory.

A SeaweedFS S3 server (``e2e/harness/s3.py``, the tests' own) and an embedded PostgreSQL
start on loopback; a source of random bytes is written under the artifact root. Each leg is
one storage.copy step run by a fresh ``dirigent worker`` subprocess reaching S3 through the
ambient ``AWS_*`` environment, as ``make s3-up`` exports it, timed after a 1 MiB warm-up
copy on the same worker (its first S3 request builds the client):

    up      file:// -> s3://   (streamed through the worker, multipart upload)
    across  s3://   -> s3://   (server-side: no byte through the worker)
    down    s3://   -> file:// (streamed through the worker, ranged GET)

Against them, the raw client on the same server: aiobotocore in a child process doing one
``PutObject`` from the file and one ``GetObject`` streamed back to disk. Peak RSS is each
child's own, from the kernel's accounting of that process (``os.wait4``), so it is the true
maximum over its life; an idle worker's peak is the baseline the copies are measured
against. Flat memory means a worker's peak does not grow with the object.

    uv run python bench/storage_s3.py            # 1 GiB
    uv run python bench/storage_s3.py --quick    # 64 MiB

Last line (machine-readable), sizes in MiB and rates in MiB/s:
    size_mb=... up_mb_per_s=... down_mb_per_s=... across_seconds=... raw_up_mb_per_s=...
    raw_down_mb_per_s=... idle_worker_peak_rss_mb=... up_worker_peak_rss_mb=...
    down_worker_peak_rss_mb=... raw_up_peak_rss_mb=... raw_down_peak_rss_mb=...
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from storage_copy import finish, write_source
from workers import apply, door, wait_registered

from dirigent.engine import RunRequest
from dirigent.engine.infrastructure.embedded import EmbeddedPostgres
from dirigent.engine.store.pool import create_pool
from dirigent.engine.store.schema.database import create_database, upgrade_async

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: e2e's harness

from e2e.harness.s3 import S3Endpoint, S3Server, ensure_weed

MiB = 1 << 20


def _peak_mb(proc: subprocess.Popen[bytes], *, stop: bool) -> tuple[int, float]:
    """Wait for ``proc`` (after SIGTERM when ``stop``): its exit code and its own peak RSS."""
    if stop:
        proc.send_signal(signal.SIGTERM)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss / 1024


def _worker(url: str, root: Path, endpoint: S3Endpoint) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        **endpoint.env(),
        "AWS_EC2_METADATA_DISABLED": "true",
        "DIRIGENT_DATABASE_URL": url,
        "DIRIGENT_WORKER_CONCURRENCY": "1",
        "DIRIGENT_ARTIFACT_ROOT": str(root),
        "DIRIGENT_METRICS_PORT": "0",
        "DIRIGENT_POLL_INTERVAL": "0.2",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "dirigent.cli", "worker"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _copy(name: str, source: str, target: str) -> str:
    return f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: {name}}}
spec:
  steps:
    copy: {{block: storage.copy, config: {{source: '{source}', target: '{target}'}}}}
"""


async def _leg(
    url: str,
    root: Path,
    endpoint: S3Endpoint,
    name: str,
    legs: tuple[tuple[str, str], tuple[str, str]],
) -> tuple[float, float, str | None]:
    """One copy step on a fresh worker: seconds, the worker's peak RSS, the output digest.

    ``legs``: a small warm-up copy between the same schemes first (a worker's first S3
    request builds its client: botocore loads its models), then the measured one.
    """
    (warm_from, warm_to), (source, target) = legs
    pool = await create_pool(url, max_size=2)
    try:
        async with door(url) as engine:
            await apply(engine, _copy(f"{name}-warm", warm_from, warm_to))
            await apply(engine, _copy(name, source, target))
            await pool.execute("DELETE FROM workers")
            proc = _worker(url, root, endpoint)
            await wait_registered(pool, 1)
            warm = await engine.runs.start(RunRequest("default", f"{name}-warm", {}))
            assert await finish(pool, warm.run_id) == "succeeded", f"{name}: the warm-up failed"
            created = await engine.runs.start(RunRequest("default", name, {}))
        started = time.monotonic()
        status = await finish(pool, created.run_id)
        seconds = time.monotonic() - started
        code, peak = _peak_mb(proc, stop=True)
        output = await pool.fetchval(
            "SELECT output->>'sha256' FROM step_attempts WHERE run_id = $1", created.run_id
        )
        error = await pool.fetchval(
            "SELECT error_message FROM step_attempts WHERE run_id = $1", created.run_id
        )
    finally:
        await pool.close()
    assert status == "succeeded", f"{name}: {status}: {error}"
    assert code == 0, f"{name}: the worker exited with {code}"
    return seconds, peak, output


async def _idle_peak(url: str, root: Path, endpoint: S3Endpoint) -> float:
    pool = await create_pool(url, max_size=2)
    try:
        proc = _worker(url, root, endpoint)
        await wait_registered(pool, 1)
        await pool.execute("DELETE FROM workers")
    finally:
        await pool.close()
    return _peak_mb(proc, stop=True)[1]


def _raw(mode: str, endpoint: S3Endpoint, path: Path, key: str) -> tuple[float, float]:
    """The raw client in a child process: seconds it reported, and its peak RSS."""
    proc = subprocess.Popen(
        [sys.executable, __file__, "--raw", mode, str(path), key],
        env={**os.environ, **endpoint.env(), "AWS_EC2_METADATA_DISABLED": "true"},
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    seconds = float(proc.stdout.read().decode().strip().splitlines()[-1])
    code, peak = _peak_mb(proc, stop=False)
    assert code == 0, f"raw {mode} exited with {code}"
    return seconds, peak


async def _raw_child(mode: str, path: Path, key: str) -> None:
    """aiobotocore as it comes: one PutObject from the open file, one GetObject to disk."""
    from aiobotocore.session import get_session

    bucket = os.environ["DIRIGENT_S3_BUCKET"]
    session = get_session()
    async with session.create_client(
        "s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name=os.environ["AWS_REGION"]
    ) as client:
        started = time.monotonic()
        if mode == "up":
            with path.open("rb") as body:
                await client.put_object(Bucket=bucket, Key=key, Body=body)
        else:
            response: Any = await client.get_object(Bucket=bucket, Key=key)
            with path.open("wb") as out:
                async for chunk in response["Body"].iter_chunks(MiB):
                    out.write(chunk)
        print(f"{time.monotonic() - started:.3f}")


async def main(size_mb: int) -> None:
    base = Path(tempfile.mkdtemp(prefix="dirigent-bench-s3-"))
    root = base / "artifacts"
    own = root / "namespaces" / "default"
    source = own / "in" / "big.bin"
    digest = write_source(source, size_mb)
    small = own / "in" / "small.bin"
    write_source(small, 1)
    server = EmbeddedPostgres(base / "pgdata")
    server.start()
    s3 = S3Server(ensure_weed(), base / "s3", bucket="bench")
    try:
        endpoint = s3.start()
        await create_database(server.url, "s3copy")
        url = server.url_for("s3copy")
        await upgrade_async(url)
        idle = await _idle_peak(url, root, endpoint)
        bucket = f"s3://{endpoint.bucket}/bench"
        warm = (small.as_uri(), f"{bucket}/warm.bin")
        up = await _leg(url, root, endpoint, "up", (warm, (source.as_uri(), f"{bucket}/big.bin")))
        across = await _leg(
            url,
            root,
            endpoint,
            "across",
            ((warm[1], f"{bucket}/warm2.bin"), (f"{bucket}/big.bin", f"{bucket}/c.bin")),
        )
        back = (own / "out" / "big.bin").as_uri()
        warm_back = (f"{bucket}/warm.bin", (own / "out" / "warm.bin").as_uri())
        down = await _leg(url, root, endpoint, "down", (warm_back, (f"{bucket}/c.bin", back)))
        assert up[2] == down[2] == digest, "a copy's digest differs from the source's"
        raw_up = _raw("up", endpoint, source, "bench/raw.bin")
        raw_down = _raw("down", endpoint, base / "raw-down.bin", "bench/raw.bin")
        assert _sha256(base / "raw-down.bin") == digest
        _report(size_mb, idle, up, across, down, raw_up, raw_down)
    finally:
        s3.stop()
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(MiB):
            digest.update(chunk)
    return digest.hexdigest()


def _report(
    size_mb: int,
    idle: float,
    up: tuple[float, float, Any],
    across: tuple[float, float, Any],
    down: tuple[float, float, Any],
    raw_up: tuple[float, float],
    raw_down: tuple[float, float],
) -> None:
    rows = [
        ("up   file -> s3 (worker)", up[0], up[1]),
        ("down s3 -> file (worker)", down[0], down[1]),
        ("up   PutObject (raw client)", raw_up[0], raw_up[1]),
        ("down GetObject (raw client)", raw_down[0], raw_down[1]),
    ]
    for label, seconds, peak in rows:
        print(f"{label:30} {size_mb / seconds:7.0f} MiB/s  peak RSS {peak:5.0f} MiB")
    print(f"across s3 -> s3 (server-side)  {across[0]:.2f}s, worker peak RSS {across[1]:.0f} MiB")
    print(f"an idle worker peaks at {idle:.0f} MiB")
    print(
        f"size_mb={size_mb} up_mb_per_s={size_mb / up[0]:.0f} "
        f"down_mb_per_s={size_mb / down[0]:.0f} across_seconds={across[0]:.2f} "
        f"raw_up_mb_per_s={size_mb / raw_up[0]:.0f} raw_down_mb_per_s={size_mb / raw_down[0]:.0f} "
        f"idle_worker_peak_rss_mb={idle:.0f} up_worker_peak_rss_mb={up[1]:.0f} "
        f"down_worker_peak_rss_mb={down[1]:.0f} raw_up_peak_rss_mb={raw_up[1]:.0f} "
        f"raw_down_peak_rss_mb={raw_down[1]:.0f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--quick", action="store_true", help="64 MiB instead of 1 GiB.")
    parser.add_argument("--raw", nargs=3, metavar=("MODE", "PATH", "KEY"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.raw:
        asyncio.run(_raw_child(args.raw[0], Path(args.raw[1]), args.raw[2]))
    else:
        asyncio.run(main(64 if args.quick else args.size_mb))
