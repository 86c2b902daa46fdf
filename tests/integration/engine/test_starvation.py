"""Waiting work is not starved by a big fan-out: probes and pokes have a reserved share of
every claim, so a sensor's lag stays within one poll interval while 10,000 items queue."""

from __future__ import annotations

from pathlib import Path

from tests.support.harness import Harness

POLL = 1.0
POKES = 4


async def test_sensors_keep_their_poll_interval_beside_a_10k_fan_out(
    h: Harness, tmp_path: Path
) -> None:
    ticks = tmp_path / "ticks.log"
    await h.apply("""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: wide}
spec:
  params: {type: object, properties: {items: {type: array}}}
  steps:
    each: {block: core.noop, forEach: "${params.items}"}
""")
    await h.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: sensors}}
spec:
  steps:
    tick: {{block: testing.tick, poll: "{POLL}", forEach: {list(range(50))},
            config: {{path: "{ticks}", poll: {POLL}, pokes: {POKES}}}}}
""")
    wide = await h.run("wide", {"items": list(range(10_000))})
    sensors = await h.run("sensors")
    async with h.workers(1, concurrency=8):
        assert await h.until_finished(sensors.run_id, timeout=120) == "succeeded"
        # The sensors finished while the fan-out was still going: they ran beside it.
        assert await h.status(wide.run_id) == "running"
        assert await h.until_finished(wide.run_id, timeout=600) == "succeeded"
    lags = sorted(
        float(ln.split()[0]) for ln in ticks.read_text().splitlines() if not ln.startswith("first")
    )
    assert len(lags) == 50 * (POKES - 1)
    print(f"probe lag beside a 10k fan-out: p50 {lags[len(lags) // 2]:.3f}s max {lags[-1]:.3f}s")
    assert lags[-1] <= POLL, f"a poke came {lags[-1]:.2f}s late (poll interval {POLL}s)"
