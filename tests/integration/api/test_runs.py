"""Runs through the API: detail and grids, cancel, retry, logs, artifacts; connections
redacted; the catalog, workers and system info."""

from __future__ import annotations

import asyncio
import hashlib
import json

import httpx
import pytest
import yaml

from dirigent.api.client import ApiError
from dirigent.engine.shapes.manifests.loading import parse_manifest
from tests.support.api import TOKEN, Api
from tests.support.waiting import eventually

FAN_OUT = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: fan}
spec:
  params: {type: object, properties: {n: {type: array}}}
  steps:
    each: {block: core.echo, forEach: "${params.n}", config: {value: "${item}"}}
    after: {block: core.noop, dependsOn: [each]}
"""

FLAKY = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: flaky}
spec:
  steps:
    first: {block: core.echo, config: {value: hello}}
    second: {block: core.fail, dependsOn: [first], retry: {maxAttempts: 1},
             config: {errorClass: transient, times: 1}}
"""


async def apply(api: Api, text: str) -> None:
    await api.client.apply("default", yaml.safe_load(text))


async def finish(api: Api, run_id: int) -> str:
    return await api.h.until_finished(run_id)


async def test_run_detail_folds_the_dag_and_grids_page_through_everything(api: Api) -> None:
    await apply(api, FAN_OUT)
    created = await api.client.run("default", "fan", {"n": list(range(7))})
    async with api.h.workers(1):
        assert await finish(api, created.run_id) == "succeeded"
    detail = await api.client.get_run("default", created.run_id)
    steps = {s.step: s for s in detail.steps}
    assert list(steps) == ["each", "after"]
    assert steps["each"].items == 7 and steps["each"].items_by_status == {"succeeded": 7}
    assert steps["each"].attempts == 7 and steps["after"].depends_on == ["each"]
    assert steps["after"].status == "succeeded" and steps["after"].duration_seconds is not None

    items, after = [], None
    while True:
        page = await api.client.list_items("default", created.run_id, "each", limit=3, after=after)
        items += page.items
        if page.next is None:
            break
        after = page.next
    assert [i.index for i in items] == list(range(7))
    assert [i.value for i in items] == list(range(7))
    attempts = await api.client.list_attempts("default", created.run_id, step="each", limit=500)
    assert len(attempts.items) == 7 and attempts.next is None

    runs = await api.client.list_runs("default", pipeline="fan", status="succeeded")
    assert [r.id for r in runs.items] == [created.run_id]
    assert (await api.client.list_runs("default", status="failed")).items == []
    assert (await api.client.list_runs("default", trigger="api")).items[0].triggered_by_ref == "dev"


async def test_retry_of_a_failed_step_needs_a_key_and_happens_once(api: Api) -> None:
    await apply(api, FLAKY)
    run = await api.client.run("default", "flaky")
    async with api.h.workers(1):
        assert await finish(api, run.run_id) == "failed"
    no_key = await api.client.http.post(
        f"/api/v1/namespaces/default/runs/{run.run_id}/$retry", json={"step": "second"}
    )
    assert no_key.status_code == 422 and no_key.json()["code"] == "request.invalid"
    assert no_key.json()["problems"][0]["location"] == "header.Idempotency-Key"

    failures = await api.client.failures("default", run.run_id)
    assert [f.step for f in failures] == ["second"]
    retried = await api.client.retry("default", run.run_id, "second", idempotency_key="r1")
    again = await api.client.retry("default", run.run_id, "second", idempotency_key="r1")
    assert retried.created and not again.created and again.attempt_ids == retried.attempt_ids
    async with api.h.workers(1):
        assert await finish(api, run.run_id) == "succeeded"
    with pytest.raises(ApiError) as not_failed:
        await api.client.retry("default", run.run_id, "second", idempotency_key="r2")
    assert not_failed.value.problem.status == 409


async def test_cancel_finishes_a_running_run(api: Api) -> None:
    await apply(
        api,
        """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: slow}
spec:
  steps:
    nap: {block: core.sleep, config: {seconds: 60}}
""",
    )
    run = await api.client.run("default", "slow")
    receipt = await api.client.cancel("default", run.run_id, "no longer needed")
    assert (receipt.run_id, receipt.status) == (run.run_id, "cancelled")
    with pytest.raises(ApiError) as missing:
        await api.client.cancel("default", 10**9)
    assert missing.value.problem.status == 404


async def test_logs_page_and_follow_to_the_end(api: Api) -> None:
    await apply(api, FAN_OUT)
    run = await api.client.run("default", "fan", {"n": [1, 2, 3]})
    followed: list[str] = []

    async def follow() -> str:
        async for event in api.client.follow_logs("default", run.run_id):
            if event.event == "end":
                return str(event.data["status"])
            followed.append(event.data["message"])
        raise AssertionError("the log stream closed without an end")

    follower = asyncio.create_task(follow())
    async with api.h.workers(1):
        assert await finish(api, run.run_id) == "succeeded"
        assert await asyncio.wait_for(follower, 20) == "succeeded"
    logged = [line["message"] for line in await api.h.logs(run.run_id)]
    assert followed == logged and len(logged) >= 4
    first = await api.client.logs("default", run.run_id, limit=2)
    rest = await api.client.logs("default", run.run_id, limit=500, after=first.next)
    assert [x.message for x in first.items + rest.items] == logged


async def test_artifacts_list_and_stream_their_content(api: Api) -> None:
    await apply(api, FAN_OUT)
    run = await api.client.run("default", "fan", {"n": ["a", "b"]})
    async with api.h.workers(1):
        assert await finish(api, run.run_id) == "succeeded"
    page = await api.client.list_artifacts("default", run.run_id)
    assert len(page.items) == 3 and {a.name for a in page.items} == {"output"}
    first = next(a for a in page.items if a.step == "each")
    content = await api.client.artifact_content("default", run.run_id, first.id)
    assert json.loads(content) in ({"value": "a"}, {"value": "b"})
    assert hashlib.sha256(content).hexdigest() == first.digest


async def test_connections_never_show_a_secret(api: Api) -> None:
    manifest, problems = parse_manifest(
        {
            "apiVersion": "dirigent.dev/v1alpha1",
            "kind": "Connection",
            "metadata": {"name": "store"},
            "spec": {
                "type": "http",
                "settings": {"url": "https://example.invalid"},
                "secrets": {"password": {"name": "s", "key": "password"}},
            },
        }
    )
    assert manifest is not None, problems
    secret = "hunter2-very-secret"
    await api.h.engine.manifests.apply(manifest, "default", secret_values={"password": secret})
    listing = await api.client.list_connections("default")
    one = await api.client.get_connection("default", "store")
    assert one.secret_fields == ["password"] and one.settings == {"url": "https://example.invalid"}
    assert listing.items == [one]
    async with httpx.AsyncClient(
        base_url=api.url, headers={"Authorization": f"Bearer {TOKEN}"}
    ) as http:
        for path in ("connections", "connections/store"):
            body = (await http.get(f"/api/v1/namespaces/default/{path}")).text
            assert secret not in body


async def test_catalog_workers_and_system_info(api: Api) -> None:
    blocks = {b.id: b for b in await api.client.list_blocks()}
    assert "core.echo" in blocks and blocks["core.echo"].config_schema["type"] == "object"
    assert blocks["testing.unsafe"].local_execution
    assert blocks["core.echo"].connection_fields == {"connection": []}
    assert blocks["docker.run"].connection_fields == {"connection": [], "cluster": ["kubernetes"]}
    async with api.h.workers(1):
        listed = await eventually(
            api.client.list_workers, lambda page: bool(page.items), timeout=10, what="a worker"
        )
        workers = listed.items
    assert workers[0].status == "active"
    schemes = await api.client.list_storage_schemes()
    assert [(s.scheme, s.plugin, s.connection_kind) for s in schemes] == [
        ("file", "engine", None),
        ("s3", "s3", "s3"),  # the dirigent-storage-s3 distribution, installed in the workspace
    ]
    info = await api.client.system_info()
    assert info.blocks == len(blocks) and info.schema_revision
    assert info.storage_schemes == ["file", "s3"]
    assert info.enabled_unsafe_blocks == ["testing.unsafe"]
