"""The reference language: ``${...}`` parsed into structure, or refused with a stable code."""

from __future__ import annotations

import pytest
from pydantic import JsonValue

from dirigent.engine.shapes.manifests.references import (
    Namespace,
    Reference,
    ReferenceError_,
    StepPart,
    find_references,
    has_references,
    parse_reference,
    parse_template,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("params.day", Reference("params.day", Namespace.PARAMS, path=("day",))),
        (
            "params.cfg.regions.0",
            Reference("params.cfg.regions.0", Namespace.PARAMS, path=("cfg", "regions", 0)),
        ),
        ("steps.a.output", Reference("steps.a.output", Namespace.STEPS, "a", StepPart.OUTPUT)),
        (
            "steps.a.output.rows.1.id",
            Reference(
                "steps.a.output.rows.1.id", Namespace.STEPS, "a", StepPart.OUTPUT, ("rows", 1, "id")
            ),
        ),
        ("steps.a.items", Reference("steps.a.items", Namespace.STEPS, "a", StepPart.ITEMS)),
        (
            "steps.a.item.output.n",
            Reference("steps.a.item.output.n", Namespace.STEPS, "a", StepPart.ITEM_OUTPUT, ("n",)),
        ),
        ("item", Reference("item", Namespace.ITEM)),
        ("item.name", Reference("item.name", Namespace.ITEM, path=("name",))),
        ("run.id", Reference("run.id", Namespace.RUN, path=("id",))),
        ("run.scratch", Reference("run.scratch", Namespace.RUN, path=("scratch",))),
        ("run.window.start", Reference("run.window.start", Namespace.RUN, path=("window.start",))),
        ("run.window.end", Reference("run.window.end", Namespace.RUN, path=("window.end",))),
        ("artifacts", Reference("artifacts", Namespace.ARTIFACTS)),
    ],
)
def test_every_namespace_parses(raw: str, expected: Reference) -> None:
    assert parse_reference(raw) == expected
    assert str(parse_reference(raw)) == "${" + raw + "}"


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("", "reference.syntax"),
        (" params.x", "reference.syntax"),
        ("env.HOME", "reference.namespace"),
        ("params", "reference.syntax"),
        ("params.0", "reference.syntax"),
        ("params.a..b", "reference.syntax"),
        ("params.a b", "reference.syntax"),
        ("steps.a", "reference.syntax"),
        ("steps.a.outputs", "reference.syntax"),
        ("steps.a.item", "reference.syntax"),
        ("run.window", "reference.run_field"),
        ("run.started", "reference.run_field"),
        ("artifacts.x", "reference.syntax"),
    ],
)
def test_syntax_errors_have_stable_codes(raw: str, code: str) -> None:
    with pytest.raises(ReferenceError_) as caught:
        parse_reference(raw)
    assert caught.value.code == code
    assert caught.value.text == raw


def test_a_lone_reference_is_standalone_and_keeps_its_type() -> None:
    template = parse_template("${params.count}")
    assert template.standalone
    assert template.references == (parse_reference("params.count"),)


def test_a_reference_inside_text_interpolates() -> None:
    template = parse_template("s3://drops/${params.day}.parquet")
    assert not template.standalone
    assert template.parts == ("s3://drops/", parse_reference("params.day"), ".parquet")


def test_two_references_make_a_template_not_a_standalone() -> None:
    assert not parse_template("${params.a}${params.b}").standalone


def test_the_escape_yields_a_literal_and_is_never_parsed() -> None:
    template = parse_template("Hello $${user.name}, run ${run.id}")
    assert template.parts == ("Hello ${user.name}, run ", parse_reference("run.id"))
    # An escaped reference is not checked, even when it would not parse.
    assert parse_template("$${not a reference!}").parts == ("${not a reference!}",)
    assert not has_references("$${params.x}")
    assert has_references("$${x} and ${params.x}")


def test_an_escape_alone_is_not_standalone() -> None:
    assert not parse_template("$${params.x}").standalone


def test_find_references_walks_nested_values_with_paths() -> None:
    value: JsonValue = {
        "url": "https://x/${params.day}",
        "rows": [{"id": "${steps.a.output.id}"}, "plain"],
        "bad": "${nope.x}",
        "escaped": "$${params.y}",
        "n": 3,
    }
    found = list(find_references(value))
    assert [(path, ref) for path, ref in found if isinstance(ref, Reference)] == [
        (("url",), parse_reference("params.day")),
        (("rows", 0, "id"), parse_reference("steps.a.output.id")),
    ]
    errors = [(path, e.code) for path, e in found if isinstance(e, ReferenceError_)]
    assert errors == [(("bad",), "reference.namespace")]
