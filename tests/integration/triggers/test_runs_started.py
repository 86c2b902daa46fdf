"""``dirigent_runs_started{namespace,pipeline,trigger}``: every door that starts a run counts it
once, after its transaction commits, in the registry the engine was given (the process's)."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from dirigent.engine import RunRequest
from dirigent.engine.shapes.views import BackfillRequest
from tests.integration.triggers.test_webhooks import TOKEN, apply_hook
from tests.support.harness import SECRET_KEY, harness

PIPELINE = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: ingest}}
spec:
  params:
    type: object
    properties:
      order: {{type: integer, default: 0}}
      region: {{type: string, default: north}}
  steps:
    a: {{block: testing.record, config: {{path: {path}}}}}
"""

SCHEDULE = """
apiVersion: dirigent.dev/v1alpha1
kind: Schedule
metadata: {name: hourly}
spec: {pipeline: ingest, cron: '0 * * * *'}
"""


def started(registry: CollectorRegistry, trigger: str) -> float:
    labels = {"namespace": "default", "pipeline": "ingest", "trigger": trigger}
    return registry.get_sample_value("dirigent_runs_started_total", labels) or 0.0


async def body(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def test_every_door_counts_the_runs_it_starts(db_url: str, tmp_path: Path) -> None:
    registry = CollectorRegistry()  # a process's own registry, handed to its engine
    async with harness(
        db_url, tmp_path / "a", unsafe=(), secret_key=SECRET_KEY, registry=registry
    ) as h:
        engine = h.engine
        await h.apply(PIPELINE.format(path=tmp_path / "rec"))
        await h.apply(SCHEDULE)
        await apply_hook(h, "orders", "", {"token": TOKEN})

        # API and CLI starts; a repeated idempotency key starts nothing new.
        await h.run("ingest")
        await h.run("ingest", idempotency_key="once")
        await h.run("ingest", idempotency_key="once")
        await engine.runs.start_many([RunRequest("default", "ingest", triggered_by_kind="cli")] * 2)
        assert (started(registry, "api"), started(registry, "cli")) == (2, 2)

        # A webhook delivery (a refused one counts nothing).
        accepted = await engine.triggers.receive_webhook(
            TOKEN, headers={}, body=body(b'{"order": 1}')
        )
        assert accepted.status_code == 202
        refused = await engine.triggers.receive_webhook("x" * 40, headers={}, body=body(b"{}"))
        assert refused.status_code == 404
        assert started(registry, "webhook") == 1

        # A firing of the Schedule, under a clock moved past its next slot.
        view = await engine.triggers.schedule("default", "hourly")
        assert view is not None and view.next_fire_at is not None
        due = view.next_fire_at + dt.timedelta(seconds=1)
        fired = await engine.triggers.scheduler(clock=lambda: due).tick()
        assert [f.ok for f in fired] == [True]
        assert started(registry, "schedule") == 1

        # A backfill counts one per window it created; a dry run counts none.
        start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        end = start + dt.timedelta(hours=3)
        await engine.triggers.backfill(
            "default",
            "ingest",
            BackfillRequest(schedule="hourly", start=start, end=end, dry_run=True),
        )
        assert started(registry, "backfill") == 0
        done = await engine.triggers.backfill(
            "default", "ingest", BackfillRequest(schedule="hourly", start=start, end=end)
        )
        assert done.created == 3
        assert started(registry, "backfill") == 3

        # The scheduler's and the intake's collectors share the registry the process serves.
        text = generate_latest(registry).decode()
        assert 'dirigent_scheduler_firings_total{result="fired"} 1.0' in text
        assert 'dirigent_webhook_deliveries_total{result="accepted"} 1.0' in text
        total = await h.fetchval("SELECT count(*) FROM runs")
        assert (
            sum(started(registry, t) for t in ("api", "cli", "webhook", "schedule", "backfill"))
            == total
        )


CHILD = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: child}
spec:
  steps:
    a: {block: core.noop}
"""

PARENT = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: parent}
spec:
  steps:
    call: {block: pipeline.run, poll: 100ms, config: {pipeline: child}}
"""


async def test_a_run_started_by_a_step_is_counted_by_the_worker(
    db_url: str, tmp_path: Path
) -> None:
    # Given a parent whose step starts a child run (``pipeline.run``), and a worker
    async with harness(db_url, tmp_path / "a", unsafe=(), secret_key=SECRET_KEY) as h:
        engine = h.engine
        await h.apply(CHILD)
        await h.apply(PARENT)
        parent = await h.run("parent")
        async with h.workers(1) as [worker]:
            assert await h.until_finished(parent.run_id, timeout=30) == "succeeded"
        # Then the child run counts once under trigger "pipeline", in the registry the
        # worker process serves, beside the parent's own start (counted by its door)
        labels = {"namespace": "default", "pipeline": "child", "trigger": "pipeline"}
        registry = worker.metrics.registry
        assert registry.get_sample_value("dirigent_runs_started_total", labels) == 1
        mine = {"namespace": "default", "pipeline": "parent", "trigger": "api"}
        assert engine.registry.get_sample_value("dirigent_runs_started_total", mine) == 1
        children = await h.fetchval("SELECT count(*) FROM runs WHERE parent_run_id IS NOT NULL")
        assert children == 1
