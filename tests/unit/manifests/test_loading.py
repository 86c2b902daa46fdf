"""Reading YAML the way kubectl does, and refusing documents with located problems."""

from __future__ import annotations

from pathlib import Path

from dirigent.engine.shapes.manifests import Schedule, parse_manifest, read_paths, read_text
from dirigent.engine.shapes.manifests.enums import TriggerRule


def test_multi_document_yaml_skips_empty_documents() -> None:
    docs, problems = read_text("---\na: 1\n---\n---\nb: 2\n", "f.yaml")
    assert problems == []
    assert [(d.file, d.index, d.data) for d in docs] == [
        ("f.yaml", 0, {"a": 1}),
        ("f.yaml", 2, {"b": 2}),
    ]


def test_unquoted_timestamps_stay_strings_as_kubectl_sends_them() -> None:
    (doc,), _ = read_text(
        "apiVersion: dirigent.dev/v1alpha1\nkind: Schedule\nmetadata: {name: s}\n"
        "spec: {pipeline: p, at: 2030-01-01T05:00:00Z, params: {day: 2025-01-01}}\n"
    )
    assert isinstance(doc.data, dict)
    manifest, problems = parse_manifest(doc.data)
    assert problems == []
    assert isinstance(manifest, Schedule)
    assert manifest.spec.params == {"day": "2025-01-01"}
    assert manifest.spec.at is not None
    assert manifest.spec.at.year == 2030


def test_a_missing_path_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    docs, problems = read_paths([tmp_path / "nope.yaml"])
    assert docs == []
    assert [(p.code, p.file) for p in problems] == [
        ("manifest.file.missing", str(tmp_path / "nope.yaml"))
    ]


def test_a_folder_is_read_recursively_in_a_stable_order(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x.yml").write_text("k: 1\n")
    (tmp_path / "a.yaml").write_text("k: 2\n")
    (tmp_path / "notes.txt").write_text("k: 3\n")
    docs, _ = read_paths([tmp_path])
    assert [Path(d.file or "").relative_to(tmp_path).as_posix() for d in docs] == [
        "a.yaml",
        "b/x.yml",
    ]


def test_a_non_mapping_document_is_refused() -> None:
    manifest, problems = parse_manifest(["a", "list"])
    assert manifest is None
    assert [p.code for p in problems] == ["manifest.not_an_object"]


def test_wire_names_are_camel_case_and_values_map_to_engine_spelling() -> None:
    assert TriggerRule.ONE_FAILED.engine_value == "one_failed"
    assert TriggerRule.ALL_SUCCESS.engine_value == "all_success"


def test_required_fields_are_named() -> None:
    _, problems = parse_manifest(
        {"apiVersion": "dirigent.dev/v1alpha1", "kind": "Pipeline", "metadata": {"name": "p"}}
    )
    assert [(p.code, p.location) for p in problems] == [("manifest.field.required", "spec")]
