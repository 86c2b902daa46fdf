"""Reference resolution: typed standalone values, interpolation, escapes, refusals.

A unit test of ``rules.resolving`` itself: it imports the module below the door on purpose.
"""

from __future__ import annotations

import datetime as dt

import pytest

from dirigent.engine.rules.resolving import Scope, UnresolvedReference, resolve


def scope(**kw: object) -> Scope:
    base: dict[str, object] = {
        "params": {"n": 3, "regions": ["no", "se"], "o": {"k": [1, 2]}},
        "run_id": 7,
        "scratch": "file:///a/runs/7",
        "artifacts": "file:///a",
    }
    return Scope(**{**base, **kw})  # type: ignore[arg-type]


def test_a_standalone_reference_keeps_its_type() -> None:
    assert resolve("${params.n}", scope()) == 3
    assert resolve("${params.o.k.1}", scope()) == 2
    assert resolve({"list": "${params.regions}"}, scope()) == {"list": ["no", "se"]}


def test_inside_a_string_it_interpolates_json_for_non_strings() -> None:
    assert resolve("n=${params.n} r=${params.regions}", scope()) == 'n=3 r=["no", "se"]'
    assert resolve("${artifacts}/kept/x.md", scope()) == "file:///a/kept/x.md"
    assert resolve("${run.scratch}", scope()) == "file:///a/runs/7"


def test_the_escape_yields_a_literal() -> None:
    assert resolve("$${params.n} and ${params.n}", scope()) == "${params.n} and 3"


def test_steps_items_and_window() -> None:
    s = scope(
        outputs={"a": {"v": 1}},
        fan_outs={"f": [{"x": 10}, None]},
        item="se",
        item_index=0,
        window=(dt.datetime(2026, 1, 1, tzinfo=dt.UTC), dt.datetime(2026, 1, 2, tzinfo=dt.UTC)),
    )
    assert resolve("${steps.a.output.v}", s) == 1
    assert resolve("${steps.f.item.output.x}", s) == 10
    assert resolve("${item}", s) == "se"
    assert resolve("${run.window.end}", s) == "2026-01-02T00:00:00+00:00"


@pytest.mark.parametrize(
    "text",
    [
        "${params.missing}",
        "${steps.gone.output}",
        "${item}",
        "${run.window.start}",
        "${params.o.k.9}",
    ],
)
def test_an_unknown_reference_is_refused_never_empty(text: str) -> None:
    with pytest.raises(UnresolvedReference):
        resolve(text, scope())
