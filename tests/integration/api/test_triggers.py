"""Triggers through the served API: the intake is mounted at /hooks/{token}, outside /api/v1
auth; a schedule, a webhook and their firings and deliveries are readable, the token never."""

from __future__ import annotations

import httpx
import pytest
import yaml

from dirigent.api.client import ApiError
from dirigent.engine.shapes.manifests.loading import parse_manifest
from tests.support.api import TOKEN, Api

HOOK_TOKEN = "hook-" + "f00dfeed" * 6
PIPELINE = {
    "apiVersion": "dirigent.dev/v1alpha1",
    "kind": "Pipeline",
    "metadata": {"name": "ingest"},
    "spec": {
        "params": {"type": "object", "properties": {"order": {"type": "integer"}}},
        "steps": {"a": {"block": "core.noop"}},
    },
}
SCHEDULE = """
apiVersion: dirigent.dev/v1alpha1
kind: Schedule
metadata: {name: nightly}
spec: {pipeline: ingest, cron: "0 5 * * *"}
"""
WEBHOOK = {
    "apiVersion": "dirigent.dev/v1alpha1",
    "kind": "Webhook",
    "metadata": {"name": "orders"},
    "spec": {"pipeline": "ingest", "paramsFromPayload": {"order": "$.id"}},
}


async def test_hooks_are_mounted_at_the_root_and_reads_show_no_token(api: Api) -> None:
    await api.client.apply("default", PIPELINE)
    plan = await api.client.apply("default", yaml.safe_load(SCHEDULE))
    assert (plan.kind, plan.action) == ("Schedule", "created")
    manifest, problems = parse_manifest(WEBHOOK)
    assert manifest is not None, problems
    await api.h.engine.manifests.apply(manifest, "default", secret_values={"token": HOOK_TOKEN})

    async with httpx.AsyncClient(base_url=api.url) as http:  # no bearer: the token is the key
        accepted = await http.post(f"/hooks/{HOOK_TOKEN}", json={"id": 7})
        unknown = await http.post("/hooks/" + "x" * 40, json={"id": 7})
    assert accepted.status_code == 202, accepted.text
    assert unknown.status_code == 404
    assert unknown.headers["content-type"] == "application/problem+json"

    base = "/api/v1/namespaces/default"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=api.url, headers=headers) as http:
        schedule = (await http.get(f"{base}/schedules/nightly")).json()
        firings = await http.get(f"{base}/schedules/nightly/firings")
        webhook = await http.get(f"{base}/webhooks/orders")
        deliveries = (await http.get(f"{base}/webhooks/orders/deliveries")).json()
        missing = await http.get(f"{base}/webhooks/absent")
    assert schedule["pipeline"] == "ingest" and firings.json() == []
    assert HOOK_TOKEN not in webhook.text and webhook.json()["pipeline"] == "ingest"
    assert [d["result"] for d in deliveries] == ["accepted"]
    assert missing.status_code == 404 and missing.json()["code"] == "webhook.not_found"
    runs = await api.client.list_runs("default", trigger="webhook")
    assert len(runs.items) == 1 and runs.items[0].triggered_by_ref == "orders"


async def test_a_webhook_is_applied_through_the_api_with_its_token(api: Api) -> None:
    await api.client.apply("default", PIPELINE)
    with pytest.raises(ApiError) as refused:
        await api.client.apply("default", WEBHOOK)
    assert refused.value.problem.code == "webhook.token.missing"
    plan = await api.client.apply("default", {**WEBHOOK, "secretValues": {"token": HOOK_TOKEN}})
    assert (plan.kind, plan.action) == ("Webhook", "created")
    again = await api.client.apply("default", WEBHOOK)  # no token: the stored one is kept
    assert again.action == "unchanged"
    async with httpx.AsyncClient(base_url=api.url) as http:
        accepted = await http.post(f"/hooks/{HOOK_TOKEN}", json={"id": 7})
    assert accepted.status_code == 202, accepted.text


async def test_schedules_and_webhooks_are_listed_by_name_in_pages_per_namespace(
    api: Api,
) -> None:
    for namespace in ("default", "other"):
        await api.client.apply(namespace, PIPELINE)
    names = ["a-nightly", "b-hourly", "c-weekly"]
    for name in names:
        schedule = yaml.safe_load(SCHEDULE.replace("nightly", name))
        await api.client.apply("default", schedule)
    await api.client.apply("other", yaml.safe_load(SCHEDULE.replace("nightly", "elsewhere")))
    tokens = {}
    for i, name in enumerate(["hook-a", "hook-b", "hook-c"]):
        manifest, problems = parse_manifest({**WEBHOOK, "metadata": {"name": name}})
        assert manifest is not None, problems
        tokens[name] = f"hook-{i}-" + "0123abcd" * 6
        await api.h.engine.manifests.apply(
            manifest, "default", secret_values={"token": tokens[name]}
        )

    first = await api.client.list_schedules("default", limit=2)
    assert [s.name for s in first.items] == names[:2] and first.next is not None
    rest = await api.client.list_schedules("default", limit=2, after=first.next)
    assert [s.name for s in rest.items] == names[2:] and rest.next is None
    assert {s.pipeline for s in first.items + rest.items} == {"ingest"}
    assert [s.name for s in (await api.client.list_schedules("other")).items] == ["elsewhere"]
    assert (await api.client.get_schedule("default", "b-hourly")).name == "b-hourly"

    page = await api.client.list_webhooks("default", limit=2)
    tail = await api.client.list_webhooks("default", limit=2, after=page.next)
    assert [w.name for w in page.items + tail.items] == ["hook-a", "hook-b", "hook-c"]
    assert tail.next is None and (await api.client.list_webhooks("other")).items == []
    async with httpx.AsyncClient(
        base_url=api.url, headers={"Authorization": f"Bearer {TOKEN}"}
    ) as http:
        raw = await http.get("/api/v1/namespaces/default/webhooks")
        bad = await http.get("/api/v1/namespaces/default/webhooks", params={"after": "nope"})
    assert raw.status_code == 200
    assert not any(token in raw.text for token in tokens.values())
    assert all(w.path.endswith("…") for w in page.items + tail.items)
    assert bad.status_code == 422 and bad.json()["code"] == "page.cursor.invalid"


async def test_the_pipeline_listing_counts_each_pipelines_schedules_and_webhooks(
    api: Api,
) -> None:
    await api.client.apply("default", PIPELINE)
    await api.client.apply("default", {**PIPELINE, "metadata": {"name": "quiet"}})
    for name in ("one", "two"):
        await api.client.apply("default", yaml.safe_load(SCHEDULE.replace("nightly", name)))
    manifest, problems = parse_manifest(WEBHOOK)
    assert manifest is not None, problems
    await api.h.engine.manifests.apply(manifest, "default", secret_values={"token": HOOK_TOKEN})
    await api.client.apply("other", PIPELINE)
    await api.client.apply("other", yaml.safe_load(SCHEDULE))

    rows = {p.name: p for p in (await api.client.list_pipelines("default")).items}
    assert (rows["ingest"].schedules, rows["ingest"].webhooks) == (2, 1)
    assert (rows["quiet"].schedules, rows["quiet"].webhooks) == (0, 0)
    [other] = (await api.client.list_pipelines("other")).items
    assert (other.schedules, other.webhooks) == (1, 0)
