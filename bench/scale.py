"""Engine cost against history: the same throughput and trigger latency, empty and after years.

The hot set (seed 004): what a claim and an outcome touch should not grow with the finished
history beside it. This bench measures the many-small-runs shape (two chained no-op steps
per run, the shape that exercises claim, outcome and progression hardest) and trigger →
first step running on an empty database, then fills it with finished history and measures
again on the same server in the same process. Each figure is the median of three rounds.

History is written set-based with ``generate_series`` (no engine round trip): finished runs,
finished between 400 and 388 days ago,
of a two-step pipeline whose second step fans out over 4 items, so every history run
holds 1 run, 2 steps, 4 items, 5 attempts and 5 log lines. Triggers are off while it is
written (``session_replication_role = replica``): ``engine_events`` is not filled. The
database is then VACUUM ANALYZEd, as autovacuum would have done over those years.

    uv run python bench/scale.py --quick    # 200k attempts of history, under two minutes
    uv run python bench/scale.py            # 1M, then 5M attempts of history

Every level prints one line; the claim's plan is printed once history is in. After the
first level, retention purges that whole history (``store.sweeping.prune_runs``, bounded
batches of 500 runs, as the sweeper does, back to back) while runs keep being created and
run by two workers (200 attempts/s); the bench prints the claim delay (an attempt queued → claimed, from its
rows) p50/p99 during the purge beside the same stream without a purge, and the purge's
batch times. The history is then written again for the next level. The last line is
machine-readable (``slowdown`` = 1 - attempts_per_s / empty_attempts_per_s, at the
largest history; target ≤ 0.10):
    history_attempts=<n> empty_attempts_per_s=<n> attempts_per_s=<n> slowdown=<f>
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg
from workers import PAIR, apply, door, start_workers, stop_workers, wait_registered

from dirigent.engine import RunRequest
from dirigent.engine.infrastructure.embedded import EmbeddedPostgres
from dirigent.engine.store.pool import connect, create_pool
from dirigent.engine.store.queries.plans import executed_plans
from dirigent.engine.store.schema.database import create_database, upgrade_async
from dirigent.engine.store.transactions.claims import CLAIM
from dirigent.engine.store.transactions.sweeping import prune_runs

HISTORY = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: history}
spec:
  steps:
    a: {block: core.noop}
    b: {block: core.noop, dependsOn: [a], forEach: [0, 1, 2, 3]}
"""
PER_RUN = 5  # attempts per history run

FILL = [
    """INSERT INTO runs (id, namespace, pipeline_id, version_id, status, triggered_by_kind, created_at,
                         started_at, finished_at, last_progress_at)
       SELECT g, 'default', $3, $4, 'succeeded', 'schedule', t, t, t + interval '2 seconds', t
       FROM generate_series($1::bigint, $2::bigint) g,
            LATERAL (SELECT now() - interval '400 days' + (g % 1000000) * interval '1 second') AS x(t)""",
    """INSERT INTO run_steps (run_id, step, status, items, items_succeeded, started_at, finished_at)
       SELECT g, s.step, 'succeeded', s.items, coalesce(s.items, 0), now() - interval '400 days',
              now() - interval '400 days'
       FROM generate_series($1::bigint, $2::bigint) g,
            (VALUES ('a', NULL::int), ('b', 4)) AS s(step, items)""",
    """INSERT INTO run_items (id, run_id, step, index, value, status, finished_at)
       SELECT g * 4 + i, g, 'b', i, to_jsonb(i), 'succeeded', now() - interval '400 days'
       FROM generate_series($1::bigint, $2::bigint) g, generate_series(0, 3) i""",
    """INSERT INTO step_attempts (run_id, run_item_id, step, item_index, number, status, block, available_at,
                                  started_at, first_started_at, finished_at, output)
       SELECT g, CASE WHEN i >= 0 THEN g * 4 + i END, CASE WHEN i < 0 THEN 'a' ELSE 'b' END,
              CASE WHEN i >= 0 THEN i END, 1, 'succeeded', 'core.noop', t, t, t, t, '{"ok": true}'
       FROM generate_series($1::bigint, $2::bigint) g, generate_series(-1, 3) i,
            LATERAL (SELECT now() - interval '400 days' + (g % 1000000) * interval '1 second') AS x(t)""",
    """INSERT INTO log_entries (run_id, step, level, message, created_at)
       SELECT g, 'b', 'info', 'history line ' || i, now() - interval '400 days'
       FROM generate_series($1::bigint, $2::bigint) g, generate_series(0, 4) i""",
]


async def fill(url: str, first_run: int, runs: int) -> float:
    """Finished history runs, ids from first_run (or above the newest run): seconds taken."""
    conn = await connect(url)
    try:
        t0 = time.perf_counter()
        row = await conn.fetchrow(
            """SELECT p.id, p.current_version_id FROM pipelines p WHERE p.name = 'history'"""
        )
        # Above every run so far: live runs made after an earlier fill took ids past it.
        first_run = max(first_run, await conn.fetchval("SELECT coalesce(max(id), 0) + 1 FROM runs"))
        async with conn.transaction():
            await conn.execute("SET LOCAL session_replication_role = replica")
            step = 200_000  # runs per statement: bounded memory per batch
            for lo in range(first_run, first_run + runs, step):
                hi = min(first_run + runs, lo + step) - 1
                await conn.execute(FILL[0], lo, hi, row["id"], row["current_version_id"])
                for sql in FILL[1:]:
                    await conn.execute(sql, lo, hi)
        for seq, table in (("runs_id_seq", "runs"), ("run_items_id_seq", "run_items")):
            await conn.execute(f"SELECT setval('{seq}', (SELECT max(id) FROM {table}))")
        await conn.execute("VACUUM ANALYZE")
        return time.perf_counter() - t0
    finally:
        await conn.close()


async def finish(pool: asyncpg.Pool, run_ids: list[int]) -> None:
    while await pool.fetchval(
        "SELECT count(*) FROM runs WHERE id = ANY($1) AND status IN ('queued', 'running')", run_ids
    ):
        await asyncio.sleep(0.02)


async def measure(url: str, runs: int, workers: int, root: Path) -> tuple[float, float]:
    """(attempts/s over ``runs`` two-step runs, trigger → first step running p50 in ms)."""
    pool = await create_pool(url, max_size=2)
    try:
        async with door(url) as engine:
            procs = start_workers(url, workers, 16, root)
            try:
                await wait_registered(pool, workers)
                created = await engine.runs.start_many(
                    [RunRequest("default", "pair") for _ in range(runs)]
                )
                t0 = time.perf_counter()
                await finish(pool, [r.run_id for r in created])
                rate = 2 * runs / (time.perf_counter() - t0)
                firsts: list[float] = []
                for _ in range(20):
                    one = await engine.runs.start(RunRequest("default", "pair"))
                    await finish(pool, [one.run_id])
                    delay = await pool.fetchval(
                        """SELECT extract(epoch FROM min(a.started_at) - r.created_at) FROM runs r
                           JOIN step_attempts a ON a.run_id = r.id WHERE r.id = $1
                           GROUP BY r.created_at""",
                        one.run_id,
                    )
                    firsts.append(float(delay) * 1000)
                bad = await pool.fetchval(
                    "SELECT count(*) FROM runs WHERE status NOT IN ('succeeded')"
                )
                assert bad == 0, f"{bad} runs did not succeed"
                return rate, statistics.median(firsts)
            finally:
                stop_workers(procs)
    finally:
        await pool.close()


async def measure_median(url: str, runs: int, root: Path, times: int = 3) -> tuple[float, float]:
    """``measure`` three times back to back, the median of each figure: one round of a few
    seconds moves by 10-20% between rounds on the same database, the size of the effect
    this bench looks for."""
    rounds = [await measure(url, runs, 2, root) for _ in range(times)]
    rates = ", ".join(f"{r:.0f}" for r, _ in rounds)
    print(f"  rounds: {rates} attempts/s", flush=True)
    return statistics.median(r for r, _ in rounds), statistics.median(t for _, t in rounds)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")


async def _purge(url: str, batch: int) -> tuple[int, list[float]]:
    """Delete every finished run older than a year in bounded batches: (runs, batch seconds)."""
    conn = await connect(url)
    try:
        deleted, times = 0, []
        while True:
            t0 = time.perf_counter()
            async with conn.transaction():
                ids = await prune_runs(conn, dt.timedelta(days=365), batch=batch)
            times.append(time.perf_counter() - t0)
            deleted += len(ids)
            if not ids:
                return deleted, times
    finally:
        await conn.close()


async def claim_delays(url: str, root: Path, *, purge: bool, seconds: float) -> dict[str, Any]:
    """Runs created in a steady stream (4 every 40 ms: 200 attempts/s, well under what two
    workers do) while two workers run them: each attempt's claim delay (queued → claimed,
    ms, from its rows: what the workers' ``claim_latency`` histogram observes). With ``purge``, the stream
    lasts as long as retention takes to delete the history; else ``seconds``."""
    pool = await create_pool(url, max_size=2)
    try:
        async with door(url) as engine:
            procs = start_workers(url, 2, 16, root)
            try:
                await wait_registered(pool, 2)
                purging = asyncio.create_task(_purge(url, 500)) if purge else None
                run_ids: list[int] = []
                t0 = time.perf_counter()
                while (purging is not None and not purging.done()) or (
                    purging is None and time.perf_counter() - t0 < seconds
                ):
                    made = await engine.runs.start_many([RunRequest("default", "pair")] * 4)
                    run_ids += [r.run_id for r in made]
                    await asyncio.sleep(0.04)
                elapsed = time.perf_counter() - t0
                await finish(pool, run_ids)
                delays = [
                    float(r[0]) * 1000
                    for r in await pool.fetch(
                        """SELECT extract(epoch FROM started_at - available_at) FROM step_attempts
                           WHERE run_id = ANY($1)""",
                        run_ids,
                    )
                ]
                out: dict[str, Any] = {"seconds": elapsed, "attempts": len(delays)}
                out["p50"], out["p99"] = _pct(delays, 0.5), _pct(delays, 0.99)
                if purging is not None:
                    out["deleted"], times = await purging
                    out["batch_p50"], out["batch_max"] = _pct(times, 0.5), max(times)
                return out
            finally:
                stop_workers(procs)
    finally:
        await pool.close()


async def purge_report(url: str, root: Path, history: int) -> None:
    """Claim delay with and without a retention purge of ``history`` attempts running."""
    during = await claim_delays(url, root, purge=True, seconds=0)
    quiet = await claim_delays(url, root, purge=False, seconds=min(during["seconds"], 30))
    print(
        f"  retention purge of {history} attempts ({during['deleted']} runs, batches of 500): "
        f"{during['seconds']:.1f}s, batch p50 {during['batch_p50'] * 1000:.0f}ms "
        f"max {during['batch_max'] * 1000:.0f}ms",
        flush=True,
    )
    print(
        f"  claim delay during the purge: p50 {during['p50']:.1f}ms p99 {during['p99']:.1f}ms "
        f"over {during['attempts']} attempts; without: p50 {quiet['p50']:.1f}ms "
        f"p99 {quiet['p99']:.1f}ms over {quiet['attempts']}",
        flush=True,
    )


async def claim_plan(url: str) -> str:
    """The plans the claim executes on this database, the body of ``claimable_queued``
    included (``store.plans``, in a transaction rolled back): which indexes it reads."""
    conn = await connect(url)
    try:
        plans = await executed_plans(
            conn, lambda c: c.fetch(CLAIM, "bench", 16, [], dt.timedelta(seconds=30))
        )
    finally:
        await conn.close()
    return "\n".join("    " + line for plan in plans for line in plan.splitlines())


async def main(quick: bool) -> None:
    runs = 500 if quick else 2500
    levels = [200_000] if quick else [1_000_000, 5_000_000]
    base = Path(tempfile.mkdtemp(prefix="dirigent-scale-"))
    server = EmbeddedPostgres(base / "pgdata")
    server.start()
    try:
        print(f"server: PostgreSQL on 127.0.0.1:{server.port} (fsync off); {runs} two-step runs")
        await create_database(server.url, "scale")
        url = server.url_for("scale")
        await upgrade_async(url)
        async with door(url) as engine:
            await apply(engine, PAIR)
            await apply(engine, HISTORY)
        # A warm-up round (discarded): the first measurement would otherwise also pay for
        # cold caches and the workers' first imports, and read as a slowdown later.
        await measure(url, runs // 5, 2, base / "art")
        empty, empty_t50 = await measure_median(url, runs, base / "art")
        print(f"history=0: {empty:.0f} attempts/s, trigger p50 {empty_t50:.1f}ms", flush=True)
        history, measured, rate = 0, 0, empty
        next_run = 10_000_000  # history ids far above the live ones
        for level in levels:
            add = (level - history) // PER_RUN
            took = await fill(url, next_run, add)
            next_run += add
            history = level
            print(f"  filled {add * PER_RUN} attempts of history in {took:.1f}s", flush=True)
            if level == levels[0]:
                print("  claim plan:\n" + await claim_plan(url))
            rate, t50 = await measure_median(url, runs, base / "art")
            print(
                f"history={history}: {rate:.0f} attempts/s, trigger p50 {t50:.1f}ms "
                f"(slowdown {1 - rate / empty:.3f})",
                flush=True,
            )
            measured = history
            if level == levels[0]:
                await purge_report(url, base / "art", history)
                history = 0  # the purge deleted it; the next level writes it again
        print(
            f"history_attempts={measured} empty_attempts_per_s={empty:.0f} "
            f"attempts_per_s={rate:.0f} slowdown={1 - rate / empty:.3f}"
        )
    finally:
        server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="200k attempts of history")
    asyncio.run(main(parser.parse_args().quick))
