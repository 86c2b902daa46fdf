"""The operator under real probes: its port answers from the start, readiness tells standby
from leader, a holder that cannot renew stops before its Lease can be taken, and the feedback
loop is restarted whatever ends it."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from dirigent.operator.app import supervised
from dirigent.operator.leadership import Leadership
from dirigent.operator.metrics import OperatorMetrics
from dirigent.operator.serving import Health, serve_health
from dirigent.operator.settings import OperatorSettings
from tests.support.waiting import eventually


async def test_probes_answer_for_a_standby_and_for_a_leader() -> None:
    health, metrics = Health(), OperatorMetrics()
    runner, port = await serve_health(health, metrics, 0, host="127.0.0.1")
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            assert (await http.get("/healthz")).status_code == 200
            standby = await http.get("/readyz")
            assert (standby.status_code, standby.json()) == (200, {"role": "standby"})
            assert "dirigent_operator_leader 0.0" in (await http.get("/metrics")).text
            health.leading = True
            leader = await http.get("/readyz")
            assert leader.json() == {"role": "leader", "feedback": "running"}
            assert "dirigent_operator_leader 1.0" in (await http.get("/metrics")).text
            health.feedback_down = "ConnectionError: the database went away"
            down = await http.get("/readyz")
            assert down.status_code == 503 and down.json()["feedback"] == "restarting"
    finally:
        await runner.cleanup()


async def test_the_feedback_loop_is_restarted_counted_and_shown_in_readiness() -> None:
    health, metrics = Health(leading=True), OperatorMetrics()
    runs = 0

    async def flaky() -> None:
        nonlocal runs
        runs += 1
        if runs < 3:
            raise ConnectionError("transport closed")  # not an ApiException: it ended the loop
        await asyncio.Event().wait()

    task = asyncio.create_task(supervised(flaky, health, metrics, backoff=(0.3, 0.3)))
    # The first run failed; the supervisor waits (0.3 s) to restart it.
    restarting = await eventually(
        health.ready, lambda r: r[0] == 503, timeout=5, every=0.01, what="not ready"
    )
    assert restarting == (
        503,
        {"role": "leader", "feedback": "restarting", "why": "ConnectionError: transport closed"},
    )
    await eventually(lambda: runs, lambda n: n >= 3, timeout=5, every=0.01, what="a third run")
    await eventually(health.ready, lambda r: r[0] == 200, timeout=5, every=0.01, what="ready again")
    assert runs == 3  # running again: ready again
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert metrics.feedback_restarts.labels(error="ConnectionError")._value.get() == 2


class _Hanging(Leadership):
    """A Lease whose renewals hang, as a partitioned API server's do."""

    def __init__(self, settings: OperatorSettings) -> None:
        super().__init__(kube=None, settings=settings, identity="me")  # type: ignore[arg-type]
        self.tries = 0

    async def _attempt(self, renewing: bool) -> bool:
        self.tries += 1
        await asyncio.sleep(3600)
        return True


async def test_a_holder_that_cannot_renew_stops_before_its_lease_expires() -> None:
    settings = OperatorSettings(lease_seconds=1.5, renew_seconds=0.2, renew_deadline_seconds=0.8)
    holder = _Hanging(settings)
    started = time.monotonic()
    await asyncio.wait_for(holder.keep(), timeout=5)
    stopped = time.monotonic() - started
    assert holder.lost.is_set()
    assert stopped < settings.lease_seconds, stopped  # before a standby may take it
    assert stopped >= settings.renew_deadline_seconds - 0.05


def test_a_deadline_that_outlives_the_lease_is_refused() -> None:
    with pytest.raises(ValueError, match="renew_deadline_seconds < lease_seconds"):
        OperatorSettings(lease_seconds=10, renew_seconds=2, renew_deadline_seconds=12)
