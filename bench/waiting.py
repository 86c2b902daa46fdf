"""Waiting sensors: do 10,000 remote waits cost rows, not memory? And how late are probes?

Issue 5's measurement. A fan-out of ``core.wait`` sensors (``pokes`` set far beyond the
benchmark, ``poll: 10s`` by default, a long deadline) is grown in chunks — one run of ``--chunk`` items
at a time — on an embedded PostgreSQL, while two ``dirigent worker`` processes (subprocesses,
as in ``bench/engine_throughput.py``) poke them. At every step of the ramp (1k, 2k, ... 10k
waiting) the benchmark holds for a while and reports:

* **RSS** of each worker process (``VmRSS`` from ``/proc/<pid>/status``). A waiting attempt
  is a row with a ``next_poll_at``; a worker holds only what it is poking right now, so RSS
  must stay flat as the waiting count grows.
* **Probe lag**: how late a poke starts after its attempt fell due. The engine keeps no
  history of pokes, but two columns of one row are enough when read at the right moments:
  parking writes ``next_poll_at`` (the due time) and leaves ``started_at`` alone; the claim
  writes ``started_at = now()`` and leaves ``next_poll_at`` alone. So a tracked sample of
  attempts (``--tracked``, spread over the chunks) is read every 0.2 s; when an attempt seen
  *waiting* with due time D is next seen with a new ``started_at`` S, the poke started
  ``S - D`` late — provided exactly one claim happened in between, which the sensor's cursor
  proves (``cursor.pokes`` unchanged while running, or one higher once parked again). Both
  timestamps are the database's ``now()``, so no clock skew enters. p50 and p99 of those.
* **Oldest overdue**: ``now() - min(next_poll_at)`` over waiting attempts already due,
  sampled with the same period: how far behind the whole backlog is at its worst point.
  Reported as p50/p99 of the samples, beside the per-poke lag.

The demand is ``waiting / poll`` pokes per second (1,000 per second at full size with
``poll: 10s``, the issue's target: probe lag p99 under 1 s, flat worker memory). Each claim
takes a batch of due pokes in one statement, and each writer batch parks every poke that
finished in the same moment with one ``UPDATE`` after locking only those attempt rows (a
batch of parkings takes no run lock). ``--poll 1s`` asks ten times as much.
Once that exceeds what two workers and the server do on this machine, lag grows with the
waiting count — that is a throughput limit, not a memory one, and the figures show where it
sets in. A poll falling due sends no NOTIFY; an idle worker sleeps until the next future
``next_poll_at`` instead, so below saturation lag is a few milliseconds.

    uv run python bench/waiting.py            # 10,000 waiting on a 10 s poll, ramped by 2,000
    uv run python bench/waiting.py --quick    # 2,000 waiting, under two minutes

The last line is machine-readable (RSS: the larger of the two workers; lag: per poke, at the
full waiting count; rss_mb_max: the largest RSS sampled at any time):
    waiting=<n> poll_s=<p> rss_mb_start=<x> rss_mb_end=<y> rss_mb_max=<z> lag_p50_ms=<a>
        lag_p99_ms=<b>
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import asyncpg
from workers import apply, door, start_workers, stop_workers

from dirigent.engine import RunRequest
from dirigent.engine.infrastructure.embedded import EmbeddedPostgres
from dirigent.engine.store.pool import create_pool
from dirigent.engine.store.schema.database import create_database, upgrade_async

PIPELINE = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: waiting}}
spec:
  params: {{type: object, properties: {{items: {{type: array}}}}}}
  steps:
    wait:
      block: core.wait
      forEach: "${{params.items}}"
      config: {{pokes: 1000000000}}
      poll: {poll}
      deadline: 24h
"""

SAMPLE_PERIOD = 0.2


@dataclass(frozen=True)
class Seen:
    status: str
    started_at: datetime | None
    next_poll_at: datetime | None
    pokes: int | None


@dataclass
class LagTracker:
    """Per-poke lag of a sample of attempts, and the oldest overdue attempt, from rows."""

    pool: asyncpg.Pool
    ids: list[int] = field(default_factory=list)
    seen: dict[int, Seen] = field(default_factory=dict)
    lags_ms: list[float] = field(default_factory=list)
    overdue_ms: list[float] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)  # workers whose RSS is followed over time
    rss: list[tuple[float, float]] = field(default_factory=list)  # (seconds, largest MB)
    started: float = field(default_factory=time.monotonic)

    async def sample(self) -> None:
        rows = await self.pool.fetch(
            """SELECT id, status, started_at, next_poll_at, (cursor->>'pokes')::int AS pokes
               FROM step_attempts WHERE id = ANY($1::bigint[])""",
            self.ids,
        )
        for r in rows:
            now = Seen(r["status"], r["started_at"], r["next_poll_at"], r["pokes"])
            before = self.seen.get(r["id"])
            self.seen[r["id"]] = now
            if (
                before is None
                or before.status != "waiting"
                or before.next_poll_at is None
                or before.pokes is None
                or now.started_at is None
                or now.started_at == before.started_at
            ):
                continue
            one_claim = (now.status == "running" and now.pokes == before.pokes) or (
                now.status == "waiting" and now.pokes == before.pokes + 1
            )
            if one_claim:
                lag = (now.started_at - before.next_poll_at).total_seconds() * 1000
                self.lags_ms.append(lag)
        overdue = await self.pool.fetchval(
            """SELECT extract(epoch FROM now() - min(next_poll_at)) FROM step_attempts
               WHERE status = 'waiting' AND next_poll_at <= now()"""
        )
        self.overdue_ms.append(float(overdue or 0) * 1000)
        elapsed = time.monotonic() - self.started
        if self.pids and (not self.rss or elapsed - self.rss[-1][0] >= 1.0):
            self.rss.append((elapsed, max(rss_mb(pid) for pid in self.pids)))

    async def hold(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            await self.sample()
            await asyncio.sleep(SAMPLE_PERIOD)

    def take(self) -> tuple[list[float], list[float]]:
        out = (self.lags_ms, self.overdue_ms)
        self.lags_ms, self.overdue_ms = [], []
        return out


def parse_seconds(duration: str) -> float:
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    for suffix in ("ms", "s", "m", "h"):
        if duration.endswith(suffix):
            return float(duration[: -len(suffix)]) * units[suffix]
    return float(duration)


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


async def poked(pool: asyncpg.Pool) -> int:
    """Attempts that have been poked at least once and are still waiting (or being poked)."""
    count: int = await pool.fetchval(
        """SELECT count(*) FROM step_attempts
           WHERE status IN ('waiting', 'running') AND cursor IS NOT NULL"""
    )
    return count


async def main(args: argparse.Namespace) -> None:
    base = Path(tempfile.mkdtemp(prefix="dirigent-bench-"))
    server = EmbeddedPostgres(base / "pgdata")
    server.start()
    try:
        print(f"server: PostgreSQL on 127.0.0.1:{server.port} (fsync off, as the test server)")
        await create_database(server.url, "waiting")
        url = server.url_for("waiting")
        await upgrade_async(url)
        pool = await create_pool(url, max_size=4)
        engine_cm = door(url)
        engine = await engine_cm.__aenter__()
        await apply(engine, PIPELINE.format(poll=args.poll))
        procs = start_workers(
            url, 2, args.concurrency, base / "art", poll_interval=args.worker_poll
        )
        try:
            while await pool.fetchval("SELECT count(*) FROM workers WHERE status = 'active'") < 2:
                await asyncio.sleep(0.1)
            await asyncio.sleep(1)
            idle = [rss_mb(p.pid) for p in procs]
            print(
                f"workers: 2 x concurrency {args.concurrency}, DIRIGENT_POLL_INTERVAL="
                f"{args.worker_poll}; sensors poll every {args.poll}; idle RSS "
                + " / ".join(f"{m:.1f}" for m in idle)
                + " MB"
            )
            print(
                f"{'waiting':>8} {'rss_w1_mb':>9} {'rss_w2_mb':>9} {'lag_p50':>8} {'lag_p99':>8}"
                f" {'pokes':>6} {'overdue_p50':>11} {'overdue_p99':>11}  (ms)"
            )
            tracker = LagTracker(pool, pids=[p.pid for p in procs])
            per_chunk = max(1, args.tracked * args.chunk // args.n)
            milestones: list[tuple[int, list[float], list[float], list[float]]] = []
            target = 0
            while target < args.n:
                size = min(args.chunk, args.n - target)
                created = await engine.runs.start(
                    RunRequest("default", "waiting", {"items": list(range(size))})
                )
                target += size
                deadline = time.monotonic() + 300
                while await poked(pool) < target:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"only {await poked(pool)} of {target} ever poked")
                    if tracker.ids:
                        await tracker.sample()
                    await asyncio.sleep(0.1)
                ids = await pool.fetch(
                    "SELECT id FROM step_attempts WHERE run_id = $1", created.run_id
                )
                tracker.ids += random.sample([r["id"] for r in ids], min(per_chunk, len(ids)))
                tracker.take()  # the ramp's burst of first pokes is not steady state
                hold = args.final_hold if target >= args.n else args.hold
                await tracker.hold(hold)
                lags, overdue = tracker.take()
                rss = [rss_mb(p.pid) for p in procs]
                milestones.append((target, rss, lags, overdue))
                print(
                    f"{target:>8} {rss[0]:>9.1f} {rss[1]:>9.1f} {pct(lags, 0.5):>8.0f}"
                    f" {pct(lags, 0.99):>8.0f} {len(lags):>6} {pct(overdue, 0.5):>11.0f}"
                    f" {pct(overdue, 0.99):>11.0f}",
                    flush=True,
                )
            done = await pool.fetchval(
                "SELECT count(*) FROM step_attempts WHERE status NOT IN ('waiting', 'running')"
            )
            assert done == 0, f"{done} attempts left waiting: the bench is not measuring waits"
        finally:
            stop_workers(procs)
            await engine_cm.__aexit__(None, None, None)
            await pool.close()
        first, last = milestones[0], milestones[-1]
        every = max(1, len(tracker.rss) // 12)
        print(
            "worker RSS over time (s: MB, the larger worker): "
            + ", ".join(f"{t:.0f}: {mb:.1f}" for t, mb in tracker.rss[::every])
        )
        print(
            f"waiting={last[0]} poll_s={parse_seconds(args.poll):g}"
            f" rss_mb_start={max(first[1]):.1f} rss_mb_end={max(last[1]):.1f}"
            f" rss_mb_max={max(mb for _, mb in tracker.rss):.1f}"
            f" lag_p50_ms={pct(last[2], 0.5):.0f} lag_p99_ms={pct(last[2], 0.99):.0f}"
        )
    finally:
        server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="2,000 waiting, under a minute")
    parser.add_argument("--n", type=int, help="waiting attempts in all (default 10,000)")
    parser.add_argument("--chunk", type=int, help="items per run: the ramp's step")
    parser.add_argument("--poll", default="10s", help="the sensors' poll (a duration)")
    parser.add_argument("--concurrency", type=int, default=16, help="per worker")
    parser.add_argument(
        "--worker-poll", type=float, default=1.0, help="DIRIGENT_POLL_INTERVAL of the workers"
    )
    parser.add_argument("--tracked", type=int, default=1000, help="attempts whose pokes are timed")
    parsed = parser.parse_args()
    if parsed.quick:
        parsed.n = parsed.n or 2000
        parsed.chunk = parsed.chunk or 1000
        parsed.hold, parsed.final_hold = 12.0, 25.0
    else:
        parsed.n = parsed.n or 10_000
        parsed.chunk = parsed.chunk or 2000
        parsed.hold, parsed.final_hold = 20.0, 45.0
    asyncio.run(main(parsed))
