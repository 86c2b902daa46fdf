"""Apply by digest, with offline and catalog validation: every door goes through this.

Through the door (``engine.manifests``), except one test: the store's own refusal to delete a
pipeline with runs in flight (``store.transactions.definitions.delete_pipeline``), which the
door never meets because its Delete policy cancels those runs first; it guards a run started
between that cancel and the delete.
"""

from __future__ import annotations

import pytest

from dirigent.engine import Applied, ProblemsError
from dirigent.engine.store.pool import in_transaction
from dirigent.engine.store.transactions import definitions
from tests.support.harness import Harness

BASE = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: p}}
spec:
  steps:
    a: {{block: core.echo, config: {{value: {value}}}}}
"""


async def apply(h: Harness, text: str) -> Applied:
    return await h.apply(text)


async def test_create_then_unchanged_then_new_version(h: Harness) -> None:
    first = await apply(h, BASE.format(value=1))
    again = await apply(h, BASE.format(value=1))
    changed = await apply(h, BASE.format(value=2))
    assert (first.action, first.version) == ("created", 1)
    assert (again.action, again.version) == ("unchanged", 1)
    assert (changed.action, changed.version) == ("updated", 2)
    assert await h.fetchval("SELECT count(*) FROM pipeline_versions") == 2


async def test_unchanged_apply_writes_nothing(h: Harness) -> None:
    await apply(h, BASE.format(value=1))
    before = await h.fetchval(
        "SELECT xmin::text || updated_at::text FROM pipelines WHERE name = 'p'"
    )
    await apply(h, BASE.format(value=1))
    after = await h.fetchval(
        "SELECT xmin::text || updated_at::text FROM pipelines WHERE name = 'p'"
    )
    assert before == after


async def test_a_reordered_document_is_the_same_version(h: Harness) -> None:
    await apply(
        h,
        """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: p}
spec:
  steps:
    b: {block: core.noop, dependsOn: [a]}
    a: {block: core.echo, config: {value: {y: 1, x: 2}}}
""",
    )
    result = await apply(
        h,
        """
kind: Pipeline
apiVersion: dirigent.dev/v1alpha1
spec:
  steps:
    a: {config: {value: {x: 2, y: 1}}, block: core.echo}
    b: {dependsOn: [a], block: core.noop}
metadata: {name: p}
""",
    )
    assert result.action == "unchanged"


async def test_deactivate_then_reapply_activates(h: Harness) -> None:
    await apply(h, BASE.format(value=1))
    assert (await h.engine.manifests.delete("Pipeline", "default", "p", "Retain")).found
    with pytest.raises(ProblemsError) as refused:
        await h.run("p")
    assert refused.value.problems[0].code == "run.pipeline.inactive"
    result = await apply(h, BASE.format(value=1))
    assert result.action == "activated"


async def test_delete_refuses_while_runs_are_in_flight(h: Harness) -> None:
    await apply(h, BASE.format(value=1))
    run = await h.run("p")
    with pytest.raises(ProblemsError) as refused:
        await in_transaction(h.pool, lambda c: definitions.delete_pipeline(c, "default", "p"))
    assert refused.value.problems[0].code == "pipeline.delete.runs_in_flight"
    async with h.workers(1):
        await h.until_finished(run.run_id)
    assert (await h.engine.manifests.delete("Pipeline", "default", "p", "Delete")).found
    assert await h.fetchval("SELECT count(*) FROM runs") == 0


async def test_catalog_problems_are_all_reported_located(h: Harness) -> None:
    text = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: bad}
spec:
  steps:
    missing: {block: nowhere.block}
    extra: {block: core.echo, config: {value: 1, colour: red}}
    typed: {block: core.sleep, config: {seconds: "soon"}}
    deferred: {block: core.sleep, dependsOn: [typed], config: {seconds: "${steps.typed.output.x}"}}
    checked: {block: testing.checked, config: {value: forbidden}}
    conn: {block: core.echo, config: {connection: nope}}
"""
    with pytest.raises(ProblemsError) as refused:
        await apply(h, text)
    found = {(p.code, p.location) for p in refused.value.problems}
    assert ("pipeline.block.unknown", "spec.steps.missing.block") in found
    assert any(
        c == "pipeline.config.invalid" and loc.startswith("spec.steps.extra.config")
        for c, loc in found
    )
    assert ("pipeline.config.invalid", "spec.steps.typed.config.seconds") in found
    assert ("testing.value.forbidden", "spec.steps.checked.config.value") in found
    assert ("pipeline.connection.unknown", "spec.steps.conn.config.connection") in found
    assert not any(loc.startswith("spec.steps.deferred") for _, loc in found), found
    assert await h.fetchval("SELECT count(*) FROM pipelines") == 0


async def test_the_requires_preflight_refuses_what_is_missing(h: Harness) -> None:
    text = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: needs}
spec:
  requires: {blocks: [core.echo, nowhere.block], connections: [absent]}
  steps:
    say: {block: core.echo, config: {value: 1}}
"""
    with pytest.raises(ProblemsError) as refused:
        await apply(h, text)
    found = {(p.code, p.location) for p in refused.value.problems}
    assert found == {
        ("pipeline.block.unknown", "spec.requires.blocks[1]"),
        ("pipeline.connection.unknown", "spec.requires.connections[0]"),
    }


async def test_the_requires_preflight_names_missing_pipelines_and_storage(h: Harness) -> None:
    needs = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: needs}
spec:
  requires: {pipelines: [needs, child], storage: [file, s3, gs]}
  steps:
    say: {block: core.echo, config: {value: 1}}
"""
    with pytest.raises(ProblemsError) as refused:
        await apply(h, needs)
    found = {(p.code, p.location, p.message) for p in refused.value.problems}
    assert found == {
        (
            "pipeline.pipeline.unknown",
            "spec.requires.pipelines[1]",
            "pipeline 'child' is required but is not an active pipeline of this namespace",
        ),
        (
            "pipeline.storage.unknown",
            "spec.requires.storage[2]",
            "storage 'gs' is required but no backend serves 'gs://' (served: file://, s3://)",
        ),
    }
    # Once the required pipeline is active (and gs no longer asked for), it is applied.
    await apply(h, BASE.format(value=1).replace("{name: p}", "{name: child}"))
    applied = await apply(h, needs.replace(", gs]", "]"))
    assert applied.action == "created"


async def test_offline_problems_refuse_apply(h: Harness) -> None:
    text = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: cyclic}
spec:
  steps:
    a: {block: core.noop, dependsOn: [b]}
    b: {block: core.noop, dependsOn: [a]}
"""
    with pytest.raises(ProblemsError) as refused:
        await apply(h, text)
    assert [p.code for p in refused.value.problems] == ["pipeline.dag.cycle"]
