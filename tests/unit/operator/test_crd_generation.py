"""The generated CRDs are structural, deterministic, and what ``crds/`` holds.

(No __init__.py here: a package named ``operator`` would shadow the standard library.)

A real apiserver is the final judge (the e2e suite applies ``crds/``); these checks catch the
rules of structural schemas offline, so a model change that breaks them fails in unit tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dirigent.operator import crds

REPO = Path(__file__).resolve().parents[3]

# The JSONSchemaProps fields a structural schema may use (and we have reason to).
ALLOWED_KEYS = {
    "description",
    "type",
    "format",
    "enum",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "anyOf",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-validations",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
}
INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]


def _nodes(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from _nodes(sub, f"{path}.{name}")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _nodes(node["additionalProperties"], f"{path}.*")
    if "items" in node:
        yield from _nodes(node["items"], f"{path}[]")


def _generated() -> list[dict[str, Any]]:
    return [yaml.safe_load(text) for text in crds.render_all().values()]


def _schema(crd: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


@pytest.fixture(params=[k.model.__name__ for k in crds.KIND_SPECS])
def crd(request: pytest.FixtureRequest) -> dict[str, Any]:
    (found,) = [c for c in _generated() if c["spec"]["names"]["kind"] == request.param]
    return found


def test_every_node_is_typed_int_or_string_or_preserved(crd: dict[str, Any]) -> None:
    for path, node in _nodes(_schema(crd)):
        assert (
            "type" in node
            or node.get("x-kubernetes-int-or-string")
            or node.get("x-kubernetes-preserve-unknown-fields")
        ), path


def test_only_structural_keywords_are_used(crd: dict[str, Any]) -> None:
    for path, node in _nodes(_schema(crd)):
        assert set(node) <= ALLOWED_KEYS, (path, set(node) - ALLOWED_KEYS)
        assert node.get("additionalProperties") is not False, path
        if "anyOf" in node:
            assert node["anyOf"] == INT_OR_STRING, path
            assert node.get("x-kubernetes-int-or-string") is True, path
            assert "type" not in node, path
        if node.get("x-kubernetes-list-type") == "map":
            assert set(node["x-kubernetes-list-map-keys"]) <= set(node["items"]["required"]), path


def test_no_reference_survives(crd: dict[str, Any]) -> None:
    text = yaml.safe_dump(crd)
    # Keywords such as title, default, const are refused node by node above (a property may
    # be *named* title); these must not appear anywhere.
    for word in ("$ref", "$defs", "x-dirigent"):
        assert word not in text


def test_metadata_is_left_to_kubernetes_and_the_name_is_a_dns_label(crd: dict[str, Any]) -> None:
    schema = _schema(crd)
    assert schema["properties"]["metadata"] == {"type": "object"}
    (rule,) = schema["x-kubernetes-validations"]
    assert rule["rule"] == (
        "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$') && size(self.metadata.name) <= 63"
    )
    assert "DNS label" in rule["message"]


def test_status_is_a_subresource_that_keeps_unknown_fields(crd: dict[str, Any]) -> None:
    version = crd["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    status = _schema(crd)["properties"]["status"]
    assert status["x-kubernetes-preserve-unknown-fields"] is True
    assert {"observedGeneration", "conditions"} <= set(status["properties"])


def test_names_group_and_version(crd: dict[str, Any]) -> None:
    spec = crd["spec"]
    names = spec["names"]
    assert crd["metadata"]["name"] == f"{names['plural']}.dirigent.dev"
    assert spec["group"] == "dirigent.dev"
    assert spec["scope"] == "Namespaced"
    assert names["categories"] == ["dirigent"]
    assert names["singular"] == names["kind"].lower()
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)


def test_printer_columns_read_fields_that_exist(crd: dict[str, Any]) -> None:
    paths = {path for path, _ in _nodes(_schema(crd))}
    for column in crd["spec"]["versions"][0]["additionalPrinterColumns"]:
        json_path: str = column["jsonPath"]
        if json_path.startswith(".metadata"):
            continue
        field_path = json_path.split("[", 1)[0]
        assert field_path in paths, column
    assert crd["spec"]["versions"][0]["additionalPrinterColumns"][-1]["name"] == "Age"


def test_plurals_and_short_names_are_as_documented() -> None:
    names = {c["spec"]["names"]["kind"]: c["spec"]["names"] for c in _generated()}
    assert {k: (n["plural"], n["shortNames"]) for k, n in names.items()} == {
        "Pipeline": ("pipelines", ["dpl"]),
        "Schedule": ("schedules", ["dsch"]),
        "Webhook": ("webhooks", ["dwh"]),
        "Connection": ("connections", ["dconn"]),
    }


def _at(crd: dict[str, Any], *path: str) -> dict[str, Any]:
    node = _schema(crd)
    for part in path:
        node = node["additionalProperties"] if part == "*" else node["properties"][part]
    return node


def test_opaque_fields_keep_unknown_fields() -> None:
    by_kind = {c["spec"]["names"]["kind"]: c for c in _generated()}
    pipeline = by_kind["Pipeline"]
    for path in (("spec", "params"), ("spec", "steps", "*", "config")):
        node = _at(pipeline, *path)
        assert node["type"] == "object"
        assert node["x-kubernetes-preserve-unknown-fields"] is True
        assert "properties" not in node
    for_each = _at(pipeline, "spec", "steps", "*", "forEach")
    assert "type" not in for_each  # a list or a string
    assert for_each["x-kubernetes-preserve-unknown-fields"] is True
    assert _at(by_kind["Schedule"], "spec", "params")["x-kubernetes-preserve-unknown-fields"]
    assert _at(by_kind["Connection"], "spec", "settings")["x-kubernetes-preserve-unknown-fields"]


def test_durations_are_int_or_string_with_their_pattern() -> None:
    (pipeline,) = [c for c in _generated() if c["spec"]["names"]["kind"] == "Pipeline"]
    timeout = _at(pipeline, "spec", "steps", "*", "timeout")
    assert timeout["x-kubernetes-int-or-string"] is True
    assert timeout["pattern"].startswith("^")
    assert timeout["minimum"] == 0


def test_step_names_are_checked_by_a_rule_on_the_map_keys() -> None:
    (pipeline,) = [c for c in _generated() if c["spec"]["names"]["kind"] == "Pipeline"]
    steps = _at(pipeline, "spec", "steps")
    assert steps["minProperties"] == 1
    assert [v["rule"] for v in steps["x-kubernetes-validations"]] == [
        "self.all(k, size(k) <= 63 && k.matches('^[a-z][a-z0-9_]*$'))"
    ]


def test_a_schedule_has_exactly_one_clock_by_rule() -> None:
    (schedule,) = [c for c in _generated() if c["spec"]["names"]["kind"] == "Schedule"]
    rules = [v["rule"] for v in _at(schedule, "spec")["x-kubernetes-validations"]]
    assert any(
        "has(self.cron)" in r and "has(self.interval)" in r and "has(self.at)" in r for r in rules
    )


def test_structural_refuses_what_it_cannot_express() -> None:
    with pytest.raises(ValueError, match="anyOf"):
        crds.structural({"anyOf": [{"type": "string"}, {"type": "integer"}]}, {})
    with pytest.raises(ValueError, match="without a type"):
        crds.structural({"description": "anything"}, {})


def test_nullable_branches_collapse_and_refs_inline() -> None:
    defs = {"Thing": {"type": "object", "title": "Thing", "properties": {"a": {"type": "string"}}}}
    node = {
        "anyOf": [{"$ref": "#/$defs/Thing"}, {"type": "null"}],
        "default": None,
        "description": "d",
    }
    assert crds.structural(node, defs) == {
        "description": "d",
        "type": "object",
        "properties": {"a": {"type": "string"}},
    }


def test_generation_is_deterministic() -> None:
    assert crds.render_all() == crds.render_all()


def test_committed_crds_are_up_to_date() -> None:
    # The drift check CI runs: `dirigent crds --check`.
    for name, text in crds.render_all().items():
        assert (REPO / "crds" / name).read_text(encoding="utf-8") == text, name
