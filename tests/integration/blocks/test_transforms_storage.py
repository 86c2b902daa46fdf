"""jq transforms and storage blocks through real runs on the embedded PostgreSQL."""

from __future__ import annotations

import pytest

from dirigent.engine.shapes.problems import ProblemsError
from tests.integration.blocks.test_http import pipeline, run_one
from tests.support.harness import Harness


async def test_transform_map_and_filter_read_an_upstream_output(h: Harness) -> None:
    await h.apply(
        pipeline(
            "jq",
            """    rows: {block: core.echo, config: {value: [{id: 1, n: 5}, {id: 2, n: 50}, {id: 3, n: 500}]}}
    big:
      block: filter.jq
      dependsOn: [rows]
      config: {program: '.n > 10', input: '${steps.rows.output.value}'}
    ids:
      block: map.jq
      dependsOn: [big]
      config: {program: '.id', input: '${steps.big.output.items}'}
    total:
      block: transform.jq
      dependsOn: [rows]
      config: {program: 'map(.n) | add', input: '${steps.rows.output.value}'}""",
        )
    )
    status, attempts = await run_one(h, "jq")
    assert status == "succeeded"
    out = {a["step"]: a["output"] for a in attempts}
    assert out["big"] == {"items": [{"id": 2, "n": 50}, {"id": 3, "n": 500}], "count": 2}
    assert out["ids"] == {"items": [2, 3], "count": 2}
    assert out["total"] == {"value": 555}


async def test_a_program_that_does_not_compile_is_refused_at_apply_even_with_a_reference_input(
    h: Harness,
) -> None:
    with pytest.raises(ProblemsError) as refused:
        await h.apply(
            pipeline(
                "bad",
                """    e: {block: core.echo, config: {value: 1}}
    t: {block: transform.jq, dependsOn: [e], config: {program: '.a |||', input: '${steps.e.output.value}'}}""",
            )
        )
    [problem] = refused.value.problems
    assert problem.code == "transform.jq.compile"
    assert "compile" in problem.message


async def test_map_refuses_a_non_list_as_rejected(h: Harness) -> None:
    await h.apply(pipeline("m", "    m: {block: map.jq, config: {program: '.', input: {a: 1}}}"))
    status, [m] = await run_one(h, "m")
    assert (status, m["error_class"], m["error_code"]) == (
        "failed",
        "rejected",
        "transform.jq.not_a_list",
    )


async def test_write_read_copy_list_and_exists_move_objects_under_the_root(h: Harness) -> None:
    root = h.storage.namespace_root(h.namespace)
    await h.apply(
        pipeline(
            "files",
            f"""    write:
      block: storage.write
      config: {{uri: '{root}/in/a.json', value: {{rows: [1, 2, 3]}}}}
    copy:
      block: storage.copy
      dependsOn: [write]
      config: {{source: '{root}/in/a.json', target: '{root}/out/b.json', chunkSize: 4}}
    seen:
      block: storage.exists
      dependsOn: [copy]
      poll: 100ms
      config: {{uri: '{root}/out/*.json'}}
    listed:
      block: storage.list
      dependsOn: [seen]
      config: {{pattern: '{root}/**.json'}}
    read:
      block: storage.read
      dependsOn: [copy]
      config: {{uri: '{root}/out/b.json'}}""",
        )
    )
    status, attempts = await run_one(h, "files")
    assert status == "succeeded", attempts
    out = {a["step"]: a["output"] for a in attempts}
    assert out["read"]["value"] == {"rows": [1, 2, 3]}
    assert out["copy"]["sha256"] == out["write"]["sha256"]
    assert [i["uri"].rsplit("/", 2)[-2:] for i in out["listed"]["items"]] == [
        ["in", "a.json"],
        ["out", "b.json"],
    ]
    assert out["seen"]["count"] == 1


async def test_a_uri_outside_the_root_is_refused(h: Harness) -> None:
    await h.apply(
        pipeline("out", "    r: {block: storage.read, config: {uri: 'file:///etc/passwd'}}")
    )
    status, [r] = await run_one(h, "out")
    assert (status, r["error_class"], r["error_code"]) == ("failed", "rejected", "storage.refused")


async def test_reading_a_missing_object_is_rejected(h: Harness) -> None:
    root = h.storage.namespace_root(h.namespace)
    await h.apply(
        pipeline("missing", f"    r: {{block: storage.read, config: {{uri: '{root}/nope'}}}}")
    )
    status, [r] = await run_one(h, "missing")
    assert (status, r["error_code"]) == ("failed", "storage.not_found")


async def test_a_step_cannot_reach_another_namespaces_artifacts(h: Harness) -> None:
    h.namespace = "team-b"
    await h.apply(
        pipeline(
            "keep",
            "    w: {block: storage.write, config: {uri: '${run.scratch}/data.json', value: 42}}",
        )
    )
    status, [w] = await run_one(h, "keep")
    assert status == "succeeded", w
    theirs = w["output"]["uri"]
    assert theirs.startswith(h.storage.namespace_root("team-b") + "/runs/")
    h.namespace = "team-a"
    root = h.storage.root_uri
    await h.apply(
        pipeline(
            "reach",
            f"""    read: {{block: storage.read, config: {{uri: '{theirs}'}}}}
    overwrite: {{block: storage.write, config: {{uri: '{theirs}', value: 0}}}}
    copy: {{block: storage.copy, config: {{source: '{theirs}', target: '${{artifacts}}/x'}}}}
    list: {{block: storage.list, config: {{pattern: '{root}/**.json'}}}}
    up: {{block: storage.read, config: {{uri: '${{artifacts}}/../team-b/runs/1/data.json'}}}}""",
        )
    )
    status, attempts = await run_one(h, "reach")
    assert status == "failed"
    for a in attempts:
        assert (a["error_class"], a["error_code"]) == ("rejected", "storage.refused"), a
        assert "namespace team-a's artifacts" in a["error_message"], a
    assert await h.storage.read_bytes(theirs) == b"42"
