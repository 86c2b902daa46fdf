"""Engine.pipeline_summary: one pipeline's runs in flight and newest run (the operator's
status feedback reads it)."""

from __future__ import annotations

from tests.support.harness import Harness


async def test_one_pipeline_summary_counts_its_runs_only(h: Harness) -> None:
    for name in ("a", "ab", "b"):
        await h.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: {name}}}
spec:
  steps:
    boom: {{block: core.fail, config: {{message: nope}}}}
""")
    assert await h.engine.pipelines.summary("default", "missing") is None
    empty = await h.engine.pipelines.summary("default", "ab")
    assert empty is not None and empty.name == "ab" and empty.last_run is None

    first = await h.run("ab")
    await h.run("b")
    summary = await h.engine.pipelines.summary("default", "ab")
    assert summary is not None and summary.runs_in_flight == 1
    async with h.workers(1):
        assert await h.until_finished(first.run_id, timeout=15) == "failed"
    summary = await h.engine.pipelines.summary("default", "ab")
    assert summary is not None and summary.runs_in_flight == 0
    assert summary.last_run is not None and summary.last_run.id == first.run_id
    assert summary.last_run.status == "failed" and summary.last_run.failed_step == "boom"
