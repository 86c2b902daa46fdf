"""Conditions keep their transition time; bodies lose server-written metadata; admission
judges only spec changes."""

from __future__ import annotations

from dirigent.operator.admission import spec_changed
from dirigent.operator.bodies import document, problem_text, to_manifest
from dirigent.operator.conditions import condition, set_condition
from dirigent.operator.connections import secret_references
from dirigent.operator.pipelines import required_connections

BODY = {
    "apiVersion": "dirigent.dev/v1alpha1",
    "kind": "Pipeline",
    "metadata": {
        "name": "p",
        "namespace": "team",
        "uid": "1234",
        "resourceVersion": "9",
        "generation": 3,
        "finalizers": ["dirigent.dev/finalizer"],
        "managedFields": [{}],
        "labels": {"team": "data"},
        "annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": "{}",
            "kopf.zalando.org/last-handled-configuration": "{}",
            "dirigent.dev/rotate-token": "now",
            "owner": "ops",
        },
    },
    "spec": {"steps": {"a": {"block": "core.noop"}}, "requires": {"connections": ["db"]}},
    "status": {"engineVersion": 1},
}


def test_a_document_keeps_what_a_person_wrote() -> None:
    doc = document(BODY)
    assert doc["metadata"] == {
        "name": "p",
        "labels": {"team": "data"},
        "annotations": {"owner": "ops"},
    }
    assert "status" not in doc
    manifest, problems = to_manifest(BODY)
    assert problems == [] and manifest is not None and manifest.metadata.name == "p"


def test_a_structural_problem_is_located() -> None:
    bad = {**BODY, "spec": {"steps": {"a": {"block": "core.noop", "dependOn": ["x"]}}}}
    manifest, problems = to_manifest(bad)
    assert manifest is None
    assert [p.code for p in problems] == ["manifest.field.unknown"]
    assert "spec.steps.a.dependOn" in problem_text(problems)


def test_the_transition_time_changes_only_with_the_status() -> None:
    first = set_condition(None, condition("Ready", False, "Invalid", "one"))
    stamp = first[0]["lastTransitionTime"]
    first[0]["lastTransitionTime"] = "2000-01-01T00:00:00Z"
    same = set_condition(first, condition("Ready", False, "Invalid", "two"))
    assert same[0]["lastTransitionTime"] == "2000-01-01T00:00:00Z"
    assert same[0]["message"] == "two"
    flipped = set_condition(same, condition("Ready", True, "Applied", "ok"))
    assert flipped[0]["lastTransitionTime"] != "2000-01-01T00:00:00Z"
    assert flipped[0]["status"] == "True" and stamp


def test_other_condition_types_are_kept() -> None:
    both = set_condition(
        [{"type": "Healthy", "status": "True"}], condition("Ready", True, "A", "m")
    )
    assert [c["type"] for c in both] == ["Healthy", "Ready"]


def test_admission_judges_only_spec_changes() -> None:
    assert spec_changed("CREATE", BODY, None)
    assert not spec_changed("UPDATE", BODY, {"spec": BODY["spec"]})
    assert spec_changed("UPDATE", BODY, {"spec": {}})
    assert not spec_changed("DELETE", BODY, None)
    deleting = {**BODY, "metadata": {**BODY["metadata"], "deletionTimestamp": "x"}}
    assert not spec_changed("UPDATE", deleting, {"spec": {}})


def test_references_are_read_from_malformed_specs_without_raising() -> None:
    assert required_connections(BODY) == ["db"]
    assert required_connections({"spec": {"requires": "nonsense"}}) == []
    conn = {"spec": {"secrets": {"a": {"name": "s1", "key": "k"}, "b": {"name": "s1"}, "c": 3}}}
    assert secret_references(conn) == ["s1"]
    assert secret_references({"spec": {"secrets": []}}) == []
