"""The machine's floor for adding Python processes: pgbench's transaction from asyncpg clients.

`engine_throughput.py` asks that throughput not fall from 2 to 4 workers. Each worker is a
Python process with its own backends, so on a machine with fewer cores than those processes
the scheduler alone can make 4 do less than 2, whatever the engine does. This control
measures that: P processes, each running pgbench's simple-update transaction (UPDATE,
SELECT, INSERT in one transaction) from ``concurrency`` asyncpg connections, on pgbench's
own tables, touching no row the others need more than pgbench does. Its ``4_vs_2`` is what
any Python client gets here; the engine's ratio is read beside it.

    python bench/client_floor.py <url> <concurrency> <start> <seconds>   # one client process

(``start`` is a wall-clock time: the processes start together, however long each took to
import and connect.)
"""

from __future__ import annotations

import argparse
import asyncio
import random
import subprocess
import sys
import time

import asyncpg

UPDATE = "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2"
SELECT = "SELECT abalance FROM pgbench_accounts WHERE aid = $1"
INSERT = """INSERT INTO pgbench_history (tid, bid, aid, delta, mtime)
            VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP)"""
STARTUP = 3.0  # seconds for every client process to import and connect before they start


async def transactions(conn: asyncpg.Connection, until: float, scale: int) -> int:
    """pgbench's simple-update, as often as one connection can until ``until``."""
    done = 0
    while time.monotonic() < until:
        aid, delta = random.randint(1, 100_000 * scale), random.randint(-5000, 5000)
        async with conn.transaction():
            await conn.execute(UPDATE, delta, aid)
            await conn.fetchval(SELECT, aid)
            await conn.execute(INSERT, random.randint(1, 10 * scale), 1, aid, delta)
        done += 1
    return done


async def client(url: str, concurrency: int, start: float, seconds: float) -> int:
    """Transactions one process committed in ``seconds`` from ``start`` (a wall-clock time)."""
    conns = [await asyncpg.connect(url) for _ in range(concurrency)]
    try:
        scale = await conns[0].fetchval("SELECT count(*) FROM pgbench_branches")
        await asyncio.sleep(max(0.0, start - time.time()))
        until = time.monotonic() + seconds
        counts = await asyncio.gather(*(transactions(c, until, scale) for c in conns))
        return sum(counts)
    finally:
        for conn in conns:
            await conn.close()


def tps(url: str, processes: int, concurrency: int, seconds: float) -> float:
    """Transactions per second of ``processes`` client processes running side by side."""
    dsn = url.replace("+asyncpg", "")
    start = time.time() + STARTUP
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, dsn, str(concurrency), str(start), str(seconds)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    outputs = [p.communicate()[0] for p in procs]
    failed = [p.returncode for p in procs if p.returncode]
    assert not failed, f"a client process failed: exit codes {failed}"
    return sum(int(out.strip()) for out in outputs) / seconds


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("url", help="a database holding pgbench's tables (pgbench -i)")
    parser.add_argument("concurrency", type=int, help="connections, each a pgbench client")
    parser.add_argument("start", type=float, help="when to start, as a Unix time")
    parser.add_argument("seconds", type=float, help="how long to run")
    args = parser.parse_args()
    print(asyncio.run(client(args.url, args.concurrency, args.start, args.seconds)))
