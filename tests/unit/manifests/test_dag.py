"""Graph helpers: the order export writes steps in, and what validation calls upstream."""

from __future__ import annotations

import pytest

from dirigent.engine.shapes.manifests import dag

DIAMOND = {"load": ["left", "right"], "left": ["extract"], "right": ["extract"], "extract": []}


def test_layers_are_by_depth_and_alphabetical() -> None:
    assert dag.layers(DIAMOND) == [["extract"], ["left", "right"], ["load"]]
    assert dag.topological_order(DIAMOND) == ["extract", "left", "right", "load"]


def test_depth_is_the_longest_path_from_a_root() -> None:
    deps = {"a": [], "b": ["a"], "c": ["b"], "d": ["a", "c"]}
    assert dag.layers(deps) == [["a"], ["b"], ["c"], ["d"]]


def test_unknown_names_are_ignored_by_the_helpers() -> None:
    assert dag.layers({"a": ["ghost"]}) == [["a"]]
    assert dag.ancestors({"a": ["ghost"]}, "a") == set()


def test_find_cycle_reads_in_edge_direction() -> None:
    deps = {"a": ["b"], "b": ["c"], "c": ["a"], "d": []}
    assert dag.find_cycle(deps) == ["a", "c", "b", "a"]
    assert dag.find_cycle(DIAMOND) is None


def test_a_self_loop_is_a_cycle() -> None:
    assert dag.find_cycle({"a": ["a"]}) == ["a", "a"]


def test_layers_raise_on_a_cycle() -> None:
    with pytest.raises(ValueError, match="cycle"):
        dag.layers({"a": ["b"], "b": ["a"]})


def test_ancestors_are_transitive_and_safe_on_cycles() -> None:
    assert dag.ancestors(DIAMOND, "load") == {"left", "right", "extract"}
    assert dag.ancestors(DIAMOND, "extract") == set()
    assert dag.ancestors({"a": ["b"], "b": ["a"]}, "a") == {"a", "b"}


def test_dependents_are_the_reverse_edges() -> None:
    assert dag.dependents(DIAMOND) == {
        "extract": ["left", "right"],
        "left": ["load"],
        "right": ["load"],
        "load": [],
    }
