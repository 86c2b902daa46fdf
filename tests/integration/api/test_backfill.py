"""``POST …/pipelines/{name}/$backfill`` through the served API and the typed client: the
windows of a cadence in ``[from, to)``, a dry run that keeps nothing, refusals as Problems."""

from __future__ import annotations

import datetime as dt

import httpx
import pytest
import yaml

from dirigent.api.client import ApiError
from tests.support.api import TOKEN, Api

PIPELINE = {
    "apiVersion": "dirigent.dev/v1alpha1",
    "kind": "Pipeline",
    "metadata": {"name": "load"},
    "spec": {"steps": {"a": {"block": "core.noop"}}},
}
SCHEDULE = """
apiVersion: dirigent.dev/v1alpha1
kind: Schedule
metadata: {name: nightly}
spec: {pipeline: load, cron: "0 5 * * *", timezone: UTC}
"""


def utc(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=dt.UTC)  # type: ignore[misc]


async def runs_of(api: Api) -> list[int]:
    page = await api.client.list_runs("default", pipeline="load", limit=100)
    return sorted(r.id for r in page.items)


async def test_backfill_plans_then_creates_one_run_per_window(api: Api) -> None:
    await api.client.apply("default", PIPELINE)
    await api.client.apply("default", yaml.safe_load(SCHEDULE))

    plan = await api.client.backfill(
        "default",
        "load",
        schedule="nightly",
        start=utc(2026, 1, 1),
        end=utc(2026, 1, 4),
        dry_run=True,
    )
    assert (plan.dry_run, plan.created, plan.refused) == (True, 3, 0)
    assert [w.start for w in plan.windows] == [
        utc(2025, 12, 31, 5),
        utc(2026, 1, 1, 5),
        utc(2026, 1, 2, 5),
    ]
    assert await runs_of(api) == []  # the dry run kept nothing

    done = await api.client.backfill(
        "default", "load", schedule="nightly", start=utc(2026, 1, 1), end=utc(2026, 1, 4)
    )
    assert (done.dry_run, done.created) == (False, 3)
    assert await runs_of(api) == sorted(w.run_id for w in done.windows if w.run_id)
    run = await api.client.get_run("default", done.windows[0].run_id or 0)
    assert run.triggered_by_kind == "backfill"


async def test_backfill_refusals_are_problems(api: Api) -> None:
    await api.client.apply("default", PIPELINE)
    with pytest.raises(ApiError) as missing:
        await api.client.backfill(
            "default", "load", schedule="absent", start=utc(2026, 1, 1), end=utc(2026, 1, 2)
        )
    assert (missing.value.problem.status, missing.value.problem.code) == (
        404,
        "backfill.schedule.not_found",
    )
    await api.client.apply("default", yaml.safe_load(SCHEDULE))
    with pytest.raises(ApiError) as backwards:
        await api.client.backfill(
            "default", "load", schedule="nightly", start=utc(2026, 1, 2), end=utc(2026, 1, 1)
        )
    assert backwards.value.problem.code == "backfill.range.invalid"
    with pytest.raises(ApiError) as too_many:
        await api.client.backfill(
            "default", "load", schedule="nightly", start=utc(2000, 1, 1), end=utc(2026, 1, 1)
        )
    assert too_many.value.problem.code == "backfill.too_many"
    # A Unix time is not a date-time: the body promises RFC 3339 text.
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=api.url, headers=headers) as http:
        numeric = await http.post(
            "/api/v1/namespaces/default/pipelines/load/$backfill",
            json={"schedule": "nightly", "from": 0, "to": "2026-01-01T00:00:00Z"},
        )
    assert numeric.status_code == 422
    assert numeric.json()["problems"][0]["location"] == "body.from"
