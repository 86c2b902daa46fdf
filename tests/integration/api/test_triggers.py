"""Triggers through the served API: the intake is mounted at /hooks/{token}, outside /api/v1
auth; a schedule, a webhook and their firings and deliveries are readable, the token never."""

from __future__ import annotations

import httpx
import pytest
import yaml

from dirigent.api.client import ApiError
from dirigent.engine.manifests.loading import parse_manifest
from tests.integration.api.conftest import TOKEN, Api

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
    await api.h.engine.apply(manifest, "default", secret_values={"token": HOOK_TOKEN})

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


async def test_webhooks_are_not_applied_through_the_api(api: Api) -> None:
    await api.client.apply("default", PIPELINE)
    with pytest.raises(ApiError) as refused:
        await api.client.apply("default", WEBHOOK)
    assert refused.value.problem.code == "apply.kind.not_via_api"
