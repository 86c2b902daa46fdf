"""Engine throughput: no-op step attempts through claim → execute → outcome, per second.

Measured on one embedded PostgreSQL, side by side with pgbench's simple-update TPS on the
same server in the same run (one attempt is two transactions: a claim and an outcome, so
the line to beat is pgbench_tps / 2: ratio 1.0 means as many transactions per second as
pgbench's simple-update).

While each scenario runs, the bench samples ``pg_stat_activity`` every 20 ms and prints the
most frequent wait events of the workers' backends (``Lock:transactionid``, ``LWLock:...``,
``Client:ClientRead`` — a backend waiting for its worker, i.e. worker CPU or round trips —
and ``CPU`` for a backend running with no wait event). With ``--statements`` the server
loads ``pg_stat_statements`` and each scenario also prints its most expensive statements.

Scenarios, each with 1, 2 and 4 `dirigent worker` processes:
  fan-out  one run with N no-op items
  runs     N/2 runs of two chained no-op steps
and a chain of sequential steps to measure the gap from a step finishing to its dependent
starting (p50, p99). Each scenario also prints the CPU time and context switches per attempt
of the workers and of the server (``cpu``). Beside each worker count runs the Python client
floor (``client_floor``): pgbench's transaction from as many asyncpg processes, which tells
what adding processes costs on this machine whatever the engine does. One untimed run of
each shape warms a new server up before pgbench and the measured runs, and each scenario's
workers run a few hundred untimed attempts before its clock starts (``warm_workers``).
Each (shape, worker count) runs three times (``--repeat``), the worker counts taking turns,
and the median is what counts: this machine's speed moves by a quarter between minutes,
more than the differences the bench is asked to show.

    uv run python bench/engine_throughput.py            # full
    uv run python bench/engine_throughput.py --quick    # under two minutes
    uv run python bench/engine_throughput.py --quick --statements   # and the top statements

The last line is machine-readable:
    attempts_per_s=<n> pgbench_tps=<n> ratio=<attempts_per_s*2/pgbench_tps>
        runs_attempts_per_s=<n> runs_ratio=<runs_attempts_per_s*2/pgbench_tps>
        fanout_4_vs_2=<median with 4 workers / median with 2> runs_4_vs_2=<the same>
        client_4_vs_2=<the client floor's, 4 processes / 2>
(attempts_per_s is the best median of the engine's scenarios; the runs_ keys are the
many-small-runs shape; the _4_vs_2 keys appear when both counts ran, and 1.0 means adding
workers cost nothing.)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import client_floor
import cpu
from workers import PAIR, apply, door, start_workers, stop_workers, wait_registered

from dirigent.engine import Engine, RunCreated, RunRequest
from dirigent.engine.infrastructure.embedded import EmbeddedPostgres, binaries_dir
from dirigent.engine.store.pool import create_pool
from dirigent.engine.store.schema.database import create_database, drop_database, upgrade_async

FAN = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: fan}}
spec:
  params: {{type: object, properties: {{n: {{type: integer}}}}}}
  steps:
    each: {{block: core.noop, forEach: {items}}}
"""
CONCURRENCY = 16  # attempts each worker runs at once, and connections per floor client
WARM = FAN.replace("name: fan", "name: warm").format(items=list(range(400)))
WARM_RUNS = 100  # two-step runs per worker in each scenario's untimed start


def chain(n: int) -> str:
    steps = "\n".join(
        f"    s{i}: {{block: core.noop{', dependsOn: [s' + str(i - 1) + ']' if i else ''}}}"
        for i in range(n)
    )
    return f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: chain}}
spec:
  steps:
{steps}
"""


async def finish(pool: asyncpg.Pool, run_ids: list[int]) -> None:
    # EXISTS stops at the first run still in flight: counting 5,000 runs every 20 ms took
    # 2.4 ms of the server's time per poll, a tenth of a core the engine under test lost.
    while await pool.fetchval(
        """SELECT EXISTS (SELECT 1 FROM runs
                          WHERE status IN ('queued', 'running') AND id = ANY($1))""",
        run_ids,
    ):
        await asyncio.sleep(0.02)


async def sample_waits(pool: asyncpg.Pool, counts: Counter[str], stop: asyncio.Event) -> None:
    """Count the wait events of the workers' backends (every non-idle one, every 20 ms)."""
    while not stop.is_set():
        rows = await pool.fetch(
            """SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') AS w, state
               FROM pg_stat_activity
               WHERE datname = current_database() AND pid <> pg_backend_pid()
                 AND application_name <> 'bench' AND backend_type = 'client backend'
                 AND state <> 'idle'"""
        )
        counts["samples"] += 1
        for r in rows:
            counts[r["w"]] += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.02)


def print_waits(counts: Counter[str]) -> None:
    samples = counts.pop("samples", 0) or 1
    total = sum(counts.values()) or 1
    top = ", ".join(f"{w} {n * 100 / total:.0f}%" for w, n in counts.most_common(6))
    print(f"  wait events ({total / samples:.1f} busy backends on average): {top}", flush=True)


async def print_statements(pool: asyncpg.Pool, limit: int = 6) -> None:
    rows = await pool.fetch(
        r"""SELECT calls, total_exec_time, rows,
                  left(regexp_replace(query, '\s+', ' ', 'g'), 90) AS q
           FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database
                                                 WHERE datname = current_database())
           ORDER BY total_exec_time DESC LIMIT $1""",
        limit,
    )
    for r in rows:
        print(f"    {r['total_exec_time']:8.0f} ms {r['calls']:7} calls  {r['q']}", flush=True)


@dataclass(frozen=True)
class Place:
    """Where a scenario runs: the server's data directory (for its processes' CPU), the
    workers' artifact root, and whether ``pg_stat_statements`` is loaded."""

    data_dir: Path
    root: Path
    statements: bool


async def create(
    engine: Engine, name: str, n: int, mark: Callable[[], cpu.Snapshot]
) -> tuple[list[RunCreated], int, float, cpu.Snapshot]:
    """The scenario's runs, how many attempts they hold, and when the clock started (with
    ``mark()``'s snapshot taken then): before the fan-out's one run is created, after the
    many runs are (they are created one at a time, which is not what is measured)."""
    if name == "fan-out":
        before, t0 = mark(), time.perf_counter()
        created = [await engine.runs.start(RunRequest("default", "fan"))]
        print(f"  created a {n}-item fan-out run in {time.perf_counter() - t0:.2f}s", flush=True)
        return created, n, t0, before
    t_create = time.perf_counter()
    # All runs in one transaction: they appear to the workers at once.
    created = await engine.runs.start_many([RunRequest("default", "pair") for _ in range(n // 2)])
    print(f"  created {n // 2} runs in {time.perf_counter() - t_create:.2f}s", flush=True)
    return created, 2 * (n // 2), time.perf_counter(), mark()


async def warm_workers(engine: Engine, pool: asyncpg.Pool, workers: int) -> None:
    """A few hundred untimed attempts of both shapes on the scenario's own workers first.

    Workers are long-lived (a Deployment), so their steady state is what counts. A fresh
    worker's first attempts cost more: its connections are opened and each statement is
    prepared and planned on each of them, and its caches fill. Four fresh workers pay that
    twice as often as two for the same attempts, and the clock counted it against them.
    """
    runs = [await engine.runs.start(RunRequest("default", "warm"))]
    runs += await engine.runs.start_many(
        [RunRequest("default", "pair") for _ in range(WARM_RUNS * workers)]
    )
    await finish(pool, [r.run_id for r in runs])


async def scenario(url: str, name: str, n: int, workers: int, place: Place) -> float:
    """Attempts per second for one scenario on a fresh database."""
    sep = "&" if "?" in url else "?"
    pool = await create_pool(f"{url}{sep}application_name=bench", max_size=3)
    waits: Counter[str] = Counter()
    stop = asyncio.Event()
    try:
        async with door(url) as engine:
            procs = start_workers(url, workers, CONCURRENCY, place.root)
            try:
                await wait_registered(pool, workers)
                await warm_workers(engine, pool, workers)
                pids = [p.pid for p in procs]
                created, attempts, t0, before = await create(
                    engine, name, n, lambda: cpu.snapshot(pids, place.data_dir)
                )
                if place.statements:
                    await pool.execute("SELECT pg_stat_statements_reset()")
                sampler = asyncio.create_task(sample_waits(pool, waits, stop))
                await finish(pool, [r.run_id for r in created])
                elapsed = time.perf_counter() - t0
                after = cpu.snapshot(pids, place.data_dir)
                stop.set()
                await sampler
                print_waits(waits)
                print(cpu.per_attempt(before, after, attempts), flush=True)
                if place.statements:
                    await print_statements(pool)
                bad = await pool.fetchval("SELECT count(*) FROM runs WHERE status <> 'succeeded'")
                assert bad == 0, f"{bad} runs did not succeed"
                return attempts / elapsed
            finally:
                stop_workers(procs)
    finally:
        await pool.close()


async def gaps(
    url: str, steps: int, root: Path, triggers: int
) -> tuple[tuple[float, float], tuple[float, float]]:
    """Latencies in ms (p50, p99): step finished → dependent started over a chain of no-op
    steps, and trigger → first step running over runs created one at a time."""
    pool = await create_pool(url, max_size=2)
    try:
        async with door(url) as engine:
            procs = start_workers(url, 1, 4, root)
            try:
                await wait_registered(pool, 1)
                run = await engine.runs.start(RunRequest("default", "chain"))
                await finish(pool, [run.run_id])
                rows = await pool.fetch(
                    """SELECT step, started_at, finished_at FROM step_attempts WHERE run_id = $1""",
                    run.run_id,
                )
                # Trigger → first step running: one run at a time on an idle worker, from the
                # creating transaction (runs.created_at) to the first attempt's claim.
                firsts: list[float] = []
                for _ in range(triggers):
                    one = await engine.runs.start(RunRequest("default", "pair"))
                    await finish(pool, [one.run_id])
                    delay = await pool.fetchval(
                        """SELECT extract(epoch FROM min(a.started_at) - r.created_at) FROM runs r
                       JOIN step_attempts a ON a.run_id = r.id WHERE r.id = $1 GROUP BY r.created_at""",
                        one.run_id,
                    )
                    firsts.append(float(delay) * 1000)
                    await asyncio.sleep(0.05)  # the worker goes idle again
            finally:
                stop_workers(procs)
    finally:
        await pool.close()
    by = {r["step"]: r for r in rows}
    gaps_ms = [
        (by[f"s{i}"]["started_at"] - by[f"s{i - 1}"]["finished_at"]).total_seconds() * 1000
        for i in range(1, steps)
    ]
    return _p50_p99(gaps_ms), _p50_p99(firsts)


def _p50_p99(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def statement_settings() -> dict[str, str]:
    return {"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "all"}


def pgbench(server: EmbeddedPostgres, seconds: int) -> float:
    exe = str(binaries_dir() / "pgbench")
    common = ["-h", "127.0.0.1", "-p", str(server.port), "-U", "postgres"]
    subprocess.run([exe, *common, "-i", "-s", "4", "-q", "bench"], check=True, capture_output=True)
    done = subprocess.run(
        [exe, *common, "-b", "simple-update", "-c", "8", "-j", "2", "-T", str(seconds), "bench"],
        check=True,
        capture_output=True,
        text=True,
    )
    match = re.search(r"tps = ([0-9.]+)", done.stdout)
    assert match, done.stdout
    return float(match.group(1))


async def create_extension(url: str) -> None:
    pool = await create_pool(url, max_size=1)
    try:
        await pool.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    finally:
        await pool.close()


async def main(quick: bool, statements: bool, workers: str | None, repeat: int | None) -> None:
    n = 2000 if quick else 10000
    worker_counts = [1, 2] if quick else [1, 2, 4]
    if workers:
        worker_counts = [int(w) for w in workers.split(",")]
    repeat = repeat or (1 if quick else 3)
    base = Path(tempfile.mkdtemp(prefix="dirigent-bench-"))
    server = EmbeddedPostgres(
        base / "pgdata", settings=statement_settings() if statements else None
    )
    server.start()
    place = Place(base / "pgdata", base / "art", statements)
    try:
        print(
            f"server: PostgreSQL on 127.0.0.1:{server.port} (fsync off, as the embedded test server)"
        )
        await warm_up(server, n, max(worker_counts), place)
        await create_database(server.url, "bench")
        tps = pgbench(server, 5 if quick else 15)
        print(
            f"pgbench simple-update: {tps:.0f} tps (8 clients) -> target {tps / 2:.0f} attempts/s"
        )
        rates = await throughput(server, n, worker_counts, repeat, place, 4 if quick else 8)
        medians = report(rates)
        (p50, p99), (t50, t99) = await latencies(server, quick, base)
        print(f"step finished -> dependent started: p50={p50:.1f}ms p99={p99:.1f}ms")
        print(f"trigger -> first step running: p50={t50:.1f}ms p99={t99:.1f}ms")
        print(summary(medians, tps))
    finally:
        server.stop()


async def warm_up(server: EmbeddedPostgres, n: int, workers: int, place: Place) -> None:
    """One untimed run of each shape before anything is measured, pgbench included.

    A new server's first minute is not its steady state: its first scenarios spent 5-10 times
    the system CPU per attempt of later ones (fresh WAL files and memory touched for the
    first time), which slowed whichever worker count the rotation put first.
    """
    for scen in ("fan-out", "runs"):
        rate = await measure(server, f"warm_{scen}".replace("-", "_"), scen, n, workers, place)
        print(f"warm-up  {scen} workers={workers}: {rate:.0f} attempts/s (not counted)")


async def measure(
    server: EmbeddedPostgres, db: str, scen: str, n: int, workers: int, place: Place
) -> float:
    """One scenario on a database of its own, dropped afterwards so that no autovacuum of
    its history runs during the next."""
    await create_database(server.url, db)
    url = server.url_for(db)
    await upgrade_async(url)
    if place.statements:
        await create_extension(url)
    async with door(url) as engine:
        await apply(engine, FAN.format(items=list(range(n))))
        await apply(engine, WARM)
        await apply(engine, PAIR)
    rate = await scenario(url, scen, n, workers, place)
    await drop_database(server.url, db)
    return rate


async def throughput(
    server: EmbeddedPostgres,
    n: int,
    worker_counts: list[int],
    repeat: int,
    place: Place,
    client_seconds: float,
) -> dict[str, dict[int, list[float]]]:
    """Every (shape, worker count) ``repeat`` times, each on a fresh database, and beside
    each count the Python client floor (``client_floor``) with as many processes.

    The machine's speed drifts between minutes, so the worker counts take turns: each round
    starts the rotation one place later, and every count runs early and late alike.
    """
    rates: dict[str, dict[int, list[float]]] = {"fan-out": {}, "runs": {}, "client": {}}
    counter = 0
    for round_ in range(repeat):
        shift = round_ % len(worker_counts)
        for workers in worker_counts[shift:] + worker_counts[:shift]:
            for scen in ("fan-out", "runs"):
                counter += 1
                rate = await measure(server, f"engine_{counter}", scen, n, workers, place)
                rates[scen].setdefault(workers, []).append(rate)
                print(f"{scen:8} n={n:6} workers={workers}: {rate:8.0f} attempts/s", flush=True)
            url = server.url_for("bench")
            tps = client_floor.tps(url, workers, CONCURRENCY, client_seconds)
            rates["client"].setdefault(workers, []).append(tps)
            print(f"client   processes={workers}: {tps:8.0f} tps", flush=True)
    return rates


def report(rates: dict[str, dict[int, list[float]]]) -> dict[str, dict[int, float]]:
    """The median of each (shape, worker count), printed with its spread."""
    medians: dict[str, dict[int, float]] = {}
    for scen, by_workers in rates.items():
        medians[scen] = {}
        for workers, values in sorted(by_workers.items()):
            medians[scen][workers] = statistics.median(values)
            unit = "tps" if scen == "client" else "attempts/s"
            print(
                f"{scen:8} workers={workers}: median {medians[scen][workers]:6.0f} {unit} "
                f"(min {min(values):.0f}, max {max(values):.0f}, {len(values)} runs)",
                flush=True,
            )
    return medians


async def latencies(
    server: EmbeddedPostgres, quick: bool, base: Path
) -> tuple[tuple[float, float], tuple[float, float]]:
    db = "engine_chain"
    await create_database(server.url, db)
    url = server.url_for(db)
    await upgrade_async(url)
    steps = 50 if quick else 200
    async with door(url) as engine:
        await apply(engine, chain(steps))
        await apply(engine, PAIR)
    return await gaps(url, steps, base / "art", 20 if quick else 100)


def summary(medians: dict[str, dict[int, float]], tps: float) -> str:
    """The machine-readable last line, from the medians.

    ``<shape>_4_vs_2`` is the median with 4 workers over the median with 2 (1.0: adding
    workers costs nothing), when both counts ran.
    """
    best = max(v for scen in ("fan-out", "runs") for v in medians[scen].values())
    runs_best = max(medians["runs"].values())
    line = (
        f"attempts_per_s={best:.0f} pgbench_tps={tps:.0f} ratio={best * 2 / tps:.3f} "
        f"runs_attempts_per_s={runs_best:.0f} runs_ratio={runs_best * 2 / tps:.3f}"
    )
    for scen, key in (("fan-out", "fanout"), ("runs", "runs"), ("client", "client")):
        if 2 in medians[scen] and 4 in medians[scen]:
            line += f" {key}_4_vs_2={medians[scen][4] / medians[scen][2]:.3f}"
    return line


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="a smaller run that finishes in under a minute"
    )
    parser.add_argument(
        "--statements",
        action="store_true",
        help="load pg_stat_statements and print each scenario's most expensive statements",
    )
    parser.add_argument("--workers", help="worker counts to run, e.g. 2,4 (default 1,2,4)")
    parser.add_argument(
        "--repeat",
        type=int,
        help="runs of each (shape, worker count); the medians are reported (default 3, quick 1)",
    )
    args = parser.parse_args()
    asyncio.run(main(args.quick, args.statements, args.workers, args.repeat))
