"""Pipelines through the API: apply with a plan, listing with summaries, export, run."""

from __future__ import annotations

import httpx
import pytest
import yaml

from dirigent.api.client import ApiError
from tests.support.api import Api

SIMPLE = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: hello}
spec:
  title: Hello
  params: {type: object, properties: {count: {type: integer, default: 1}}, additionalProperties: false}
  steps:
    first: {block: core.echo, config: {value: "${params.count}"}}
"""


def doc(text: str) -> dict[str, object]:
    loaded = yaml.safe_load(text)
    assert isinstance(loaded, dict)
    return loaded


async def test_apply_plans_without_writing_then_writes_then_is_unchanged(api: Api) -> None:
    plan = await api.client.apply("default", doc(SIMPLE), dry_run=True)
    assert (plan.action, plan.dry_run, plan.version) == ("created", True, 1)
    assert plan.steps.added == ["first"] and plan.digest
    assert (await api.client.list_pipelines("default")).items == []

    applied = await api.client.apply("default", doc(SIMPLE))
    assert (applied.action, applied.digest) == ("created", plan.digest)
    again = await api.client.apply("default", doc(SIMPLE))
    assert again.action == "unchanged"

    changed = doc(
        SIMPLE.replace("steps:", "steps:\n    second: {block: core.noop, dependsOn: [first]}")
    )
    changed_plan = await api.client.apply("default", changed, dry_run=True)
    assert changed_plan.action == "updated" and changed_plan.version == 2
    assert changed_plan.steps.added == ["second"] and changed_plan.previous_digest == plan.digest
    assert (await api.client.get_pipeline("default", "hello")).summary.version == 1


async def test_apply_refuses_invalid_documents_with_every_problem(api: Api) -> None:
    bad = doc(SIMPLE.replace("core.echo", "no.such.block"))
    bad["metadata"] = {"name": "hello", "namespace": "other"}
    with pytest.raises(ApiError) as refused:
        await api.client.apply("default", bad)
    assert refused.value.problem.status == 422
    assert refused.value.problem.code == "apply.namespace.mismatch"

    unknown_block = doc(SIMPLE.replace("core.echo", "no.such.block"))
    with pytest.raises(ApiError) as refused:
        await api.client.apply("default", unknown_block)
    assert refused.value.problem.status == 422
    assert any("no.such.block" in p.message for p in refused.value.problem.problems)

    with pytest.raises(ApiError) as refused:  # secret values belong to Connections and Webhooks
        await api.client.apply("default", {**doc(SIMPLE), "secretValues": {"x": "y"}})
    assert refused.value.problem.code == "apply.secrets.unexpected"


async def test_a_connection_is_applied_with_the_secret_values_its_refs_name(api: Api) -> None:
    connection = {
        "apiVersion": "dirigent.dev/v1alpha1",
        "kind": "Connection",
        "metadata": {"name": "c"},
        "spec": {
            "type": "http",
            "settings": {"url": "https://api.example.test"},
            "secrets": {"password": {"name": "creds", "key": "pw"}},
        },
    }
    with pytest.raises(ApiError) as refused:
        await api.client.apply("default", connection)
    assert refused.value.problem.code == "connection.secret.missing"
    plan = await api.client.apply("default", {**connection, "secretValues": {"password": "s3"}})
    assert (plan.kind, plan.action) == ("Connection", "created")
    view = await api.client.get_connection("default", "c")
    assert "s3" not in view.model_dump_json()


async def test_listing_detail_versions_export_and_validate(api: Api) -> None:
    await api.client.apply("default", doc(SIMPLE))
    await api.client.apply("default", doc(SIMPLE.replace("Hello", "Hello again")))
    for n in range(3):
        await api.client.apply("default", doc(SIMPLE.replace("hello", f"p{n}")))
    first = await api.client.list_pipelines("default", limit=2)
    second = await api.client.list_pipelines("default", limit=2, after=first.next)
    third = await api.client.list_pipelines("default", limit=2, after=second.next)
    names = [p.name for page in (first, second, third) for p in page.items]
    assert names == ["hello", "p0", "p1", "p2"] and third.next is None

    detail = await api.client.get_pipeline("default", "hello")
    assert (detail.summary.title, detail.summary.version) == ("Hello again", 2)
    versions = await api.client.list_versions("default", "hello")
    assert [v.number for v in versions.items] == [2, 1]
    assert versions.items[0].provenance == {"source": "api", "by": "dev"}

    exported = await api.client.export("default", "hello", version=1)
    assert yaml.safe_load(exported)["spec"]["title"] == "Hello"
    assert (await api.client.validate("default", "hello")).valid

    with pytest.raises(ApiError) as missing:
        await api.client.get_pipeline("default", "absent")
    assert (missing.value.problem.status, missing.value.problem.code) == (404, "pipeline.not_found")
    async with httpx.AsyncClient(base_url=api.url, headers=api.client.http.headers) as http:
        response = await http.get("/api/v1/namespaces/default/pipelines/hello/$export")
    assert response.headers["content-type"].startswith("application/yaml")


async def test_run_checks_params_and_honours_the_idempotency_key(api: Api) -> None:
    await api.client.apply("default", doc(SIMPLE))
    with pytest.raises(ApiError) as refused:
        await api.client.run("default", "hello", {"count": "many"})
    assert refused.value.problem.status == 422
    assert refused.value.problem.problems[0].location == "params.count"

    first = await api.client.run("default", "hello", {"count": 3}, idempotency_key="k-1")
    again = await api.client.run("default", "hello", {"count": 3}, idempotency_key="k-1")
    assert first.created and not again.created and again.run_id == first.run_id
    other = await api.client.run("default", "hello", {"count": 3}, idempotency_key="k-2")
    assert other.run_id != first.run_id

    listing = await api.client.list_pipelines("default")
    assert listing.items[0].runs_in_flight == 2
    assert listing.items[0].last_run is not None and listing.items[0].last_run.id == other.run_id
    with pytest.raises(ApiError) as missing:
        await api.client.run("default", "absent")
    assert missing.value.problem.status == 404
