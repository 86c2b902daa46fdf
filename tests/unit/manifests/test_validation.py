"""Whole-document checks that the broken fixtures do not already pin down.

Through the engine's public names, except one test of ``rules.validation.documents``'s
``salvage_pipeline`` itself (what ``dirigent validate`` keeps of a broken document).
"""

from __future__ import annotations

from typing import Any

from dirigent.engine import check_pipeline
from dirigent.engine.shapes.manifests import Pipeline


def _pipeline(steps: dict[str, Any], **spec: Any) -> Pipeline:
    return Pipeline.model_validate(
        {
            "apiVersion": "dirigent.dev/v1alpha1",
            "kind": "Pipeline",
            "metadata": {"name": "p"},
            "spec": {"steps": steps, **spec},
        }
    )


def _codes(pipeline: Pipeline) -> list[tuple[str, str]]:
    return [(p.code, p.location) for p in check_pipeline(pipeline)]


def test_a_step_depending_on_itself_is_reported_once() -> None:
    found = _codes(_pipeline({"a": {"block": "core.noop", "dependsOn": ["a"]}}))
    assert found == [("pipeline.dependency.self", "spec.steps.a.dependsOn[0]")]


def test_a_duplicate_edge_is_reported() -> None:
    steps = {"a": {"block": "core.noop"}, "b": {"block": "core.noop", "dependsOn": ["a", "a"]}}
    assert _codes(_pipeline(steps)) == [
        ("pipeline.dependency.duplicate", "spec.steps.b.dependsOn[1]")
    ]


def test_item_output_needs_the_paired_grid() -> None:
    steps = {
        "push": {"block": "core.echo", "forEach": ["a", "b"]},
        "paired": {
            "block": "core.echo",
            "dependsOn": ["push"],
            "forEach": "${steps.push.items}",
            "config": {"value": "${steps.push.item.output.value}"},
        },
        "unpaired": {
            "block": "core.echo",
            "dependsOn": ["push"],
            "config": {"value": "${steps.push.item.output.value}"},
        },
    }
    assert _codes(_pipeline(steps)) == [
        ("pipeline.reference.item_unpaired", "spec.steps.unpaired.config.value")
    ]


def test_for_each_over_a_step_without_a_grid_is_refused() -> None:
    steps = {
        "a": {"block": "core.echo"},
        "b": {"block": "core.echo", "dependsOn": ["a"], "forEach": "${steps.a.items}"},
    }
    assert _codes(_pipeline(steps)) == [("pipeline.for_each.not_a_fan_out", "spec.steps.b.forEach")]


def test_for_each_must_be_one_reference_or_a_list() -> None:
    steps = {
        "a": {"block": "core.echo", "forEach": "regions: ${params.r}"},
        "b": {"block": "core.echo", "forEach": 3},
    }
    assert _codes(_pipeline(steps, params={"type": "object", "properties": {"r": {}}})) == [
        ("pipeline.for_each.invalid", "spec.steps.a.forEach"),
        ("pipeline.for_each.invalid", "spec.steps.b.forEach"),
    ]


def test_params_must_describe_an_object() -> None:
    found = _codes(_pipeline({"a": {"block": "core.noop"}}, params={"type": "array"}))
    assert found == [("pipeline.params.not_object", "spec.params.type")]


def test_an_open_params_schema_allows_any_name() -> None:
    steps = {"a": {"block": "core.echo", "config": {"value": "${params.anything}"}}}
    open_schema = {"type": "object", "additionalProperties": True}
    assert _codes(_pipeline(steps, params=open_schema)) == []
    assert _codes(_pipeline(steps)) == [
        ("pipeline.reference.unknown_param", "spec.steps.a.config.value")
    ]


def test_backoff_longer_than_its_cap_is_refused() -> None:
    steps = {"a": {"block": "core.noop", "retry": {"backoff": "1h", "maxBackoff": "1m"}}}
    assert _codes(_pipeline(steps)) == [
        ("pipeline.retry.backoff_exceeds_max", "spec.steps.a.retry.backoff")
    ]


def test_duplicate_alert_names_are_refused() -> None:
    alert = {"name": "x", "event": "RunFailed", "notifier": "log"}
    found = _codes(_pipeline({"a": {"block": "core.noop"}}, alerts=[alert, alert]))
    assert found == [("pipeline.alert.duplicate", "spec.alerts[1].name")]


def test_a_document_refused_for_its_shape_still_gets_its_whole_document_checks() -> None:
    """Every problem at once: an unknown field does not hide a cycle or a bad reference."""
    from dirigent.engine import validate_documents
    from dirigent.engine.shapes.manifests.loading import read_text

    docs, _ = read_text(
        """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: several}
spec:
  steps:
    a: {block: core.noop, dependsOn: [b], dependOn: [x], timeout: forever}
    b: {block: core.noop, dependsOn: [a], config: {v: "${steps.nope.output}"}}
""",
        "f.yaml",
    )
    _, problems = validate_documents(docs)
    assert [(p.code, p.location) for p in problems] == [
        ("manifest.field.unknown", "spec.steps.a.dependOn"),
        ("pipeline.dag.cycle", "spec.steps.a.dependsOn"),
        ("manifest.duration.invalid", "spec.steps.a.timeout"),
        ("pipeline.reference.unknown_step", "spec.steps.b.config.v"),
    ]


def test_salvage_gives_up_on_a_missing_required_field() -> None:
    from dirigent.engine.rules.validation.documents import salvage_pipeline

    assert (
        salvage_pipeline(
            {
                "apiVersion": "dirigent.dev/v1alpha1",
                "kind": "Pipeline",
                "metadata": {"name": "p"},
                "spec": {"steps": {"a": {"config": {}}}},
            }
        )
        is None
    )
