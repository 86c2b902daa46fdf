"""Logs and outputs: ctx.log lines and the engine's own line land with the outcome; outputs
are kept whole on the attempt and recorded as artifacts, inline or in scratch storage."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from urllib.parse import urlparse

from tests.support.harness import Harness


async def test_block_log_lines_and_engine_line_are_written_with_the_outcome(
    h: Harness, tmp_path: Path
) -> None:
    await h.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: p}}
spec:
  steps:
    rec: {{block: testing.record, config: {{path: "{tmp_path}/rec.log"}}}}
    bad: {{block: core.fail, config: {{errorClass: rejected, message: boom}}}}
""")
    run = await h.run("p")
    async with h.workers(1):
        await h.until_finished(run.run_id)
    lines = [(e["step"], e["level"], e["message"]) for e in await h.logs(run.run_id) if e["step"]]
    assert ("rec", "info", "recorded") in lines
    finished = [
        e for e in await h.logs(run.run_id) if e["step"] == "rec" and e["message"] == "finished"
    ]
    assert set(finished[0]["fields"]) == {"duration_ms", "output_bytes"}
    failed = [e for e in await h.logs(run.run_id) if e["step"] == "bad" and e["level"] == "error"]
    assert failed[0]["fields"]["error_class"] == "rejected"


async def test_small_outputs_are_inlined_large_ones_go_to_scratch(h: Harness) -> None:
    big = "x" * 70_000
    await h.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: p}}
spec:
  steps:
    small: {{block: core.echo, config: {{value: tiny}}}}
    large: {{block: core.echo, config: {{value: "{big}"}}}}
    reader: {{block: core.echo, dependsOn: [large], config: {{value: "${{steps.large.output.value}}"}}}}
""")
    run = await h.run("p")
    async with h.workers(1):
        assert await h.until_finished(run.run_id) == "succeeded"
    async with h.pool.acquire() as conn:
        rows = {
            r["step"]: r
            for r in await conn.fetch(
                """SELECT a.step, r.* FROM artifact_refs r JOIN step_attempts a ON a.id = r.attempt_id
               WHERE r.run_id = $1""",
                run.run_id,
            )
        }
    assert rows["small"]["inline"] == {"value": "tiny"} and rows["small"]["uri"] is None
    large = rows["large"]
    assert large["inline"] is None and large["uri"].startswith(
        h.storage.run_prefix(h.namespace, run.run_id) + "/"
    )
    data = Path(urlparse(large["uri"]).path).read_bytes()
    assert json.loads(data) == {"value": big}
    assert large["size"] == len(data) and large["digest"] == hashlib.sha256(data).hexdigest()
    [reader] = await h.attempts(run.run_id, "reader")
    assert reader["output"] == {"value": big}
