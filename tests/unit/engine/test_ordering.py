"""The apply order of many documents: kinds by what they name, Pipelines after what they
require (``dirigent dev`` and ``dirigent apply -f`` apply a folder in this order)."""

from __future__ import annotations

from typing import Any

from dirigent.engine.shapes.manifests.ordering import apply_order, facts_of


def doc(kind: str, name: str, *requires: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"requires": {"pipelines": list(requires)}} if requires else {}
    return {"kind": kind, "metadata": {"name": name}, "spec": spec}


def order(*docs: dict[str, Any]) -> list[str]:
    ranked = apply_order(list(docs), facts_of, lambda d: d["metadata"]["name"])
    return [f"{d['kind']}/{d['metadata']['name']}" for d in ranked]


def test_kinds_go_in_the_order_their_references_need() -> None:
    assert order(
        doc("Webhook", "a"), doc("Pipeline", "b"), doc("Schedule", "c"), doc("Connection", "d")
    ) == ["Connection/d", "Pipeline/b", "Schedule/c", "Webhook/a"]


def test_a_pipeline_goes_after_the_pipelines_it_requires_however_deep() -> None:
    assert order(
        doc("Pipeline", "a", "b"),
        doc("Pipeline", "b", "c"),
        doc("Pipeline", "c"),
        doc("Pipeline", "d"),
    ) == ["Pipeline/c", "Pipeline/d", "Pipeline/b", "Pipeline/a"]


def test_cycles_self_references_and_outsiders_do_not_stop_the_order() -> None:
    ranked = order(
        doc("Pipeline", "x", "y", "elsewhere"), doc("Pipeline", "y", "x"), doc("Pipeline", "z", "z")
    )
    assert sorted(ranked) == ["Pipeline/x", "Pipeline/y", "Pipeline/z"]


def test_documents_that_are_not_mappings_are_kept_last() -> None:
    ranked = apply_order(["junk", doc("Pipeline", "p")], facts_of, lambda d: 0)
    assert ranked[-1] == "junk"
