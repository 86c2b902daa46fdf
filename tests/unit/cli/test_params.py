"""The params builder: typed by the pipeline's schema, dotted and bracketed paths, refusals."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from dirigent.cli.params import build_params, parse_path
from dirigent.engine.shapes.problems import ProblemsError

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "count": {"type": "integer", "default": 1},
        "code": {"type": "string"},
        "ratio": {"type": "number"},
        "mode": {"enum": ["full", "delta"]},
        "server": {
            "type": "object",
            "properties": {
                "tls": {"type": "object", "properties": {"verify": {"type": "boolean"}}},
                "host": {"type": "string"},
            },
        },
        "regions": {"type": "array", "items": {"type": "string"}},
        "targets": {"type": "array", "items": {"$ref": "#/$defs/target"}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "$defs": {"target": {"type": "object", "properties": {"host": {"type": "string"}}}},
}


def codes(err: ProblemsError) -> list[str]:
    return [p.code for p in err.problems]


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("a", ["a"]),
        ("a.b.c", ["a", "b", "c"]),
        ("regions[0]", ["regions", 0]),
        ("regions[]", ["regions", None]),
        ("targets[0].host", ["targets", 0, "host"]),
        ("m[1][2]", ["m", 1, 2]),
    ],
)
def test_paths_parse_into_keys_and_indexes(text: str, parts: list[Any]) -> None:
    assert parse_path(text) == parts


@pytest.mark.parametrize("text", ["", "a.", ".a", "a..b", "[0]", "a[x]", "a[0]b", "a.[0]"])
def test_malformed_paths_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(text))):
        parse_path(text)


def test_values_are_typed_by_the_schema() -> None:
    got = build_params(
        SCHEMA, flags=["count=3", "code=3", "ratio=0.5", "server.tls.verify=false", "mode=full"]
    )
    assert got == {
        "count": 3,
        "code": "3",
        "ratio": 0.5,
        "server": {"tls": {"verify": False}},
        "mode": "full",
    }


def test_a_value_that_is_not_of_the_declared_type_is_refused() -> None:
    with pytest.raises(ProblemsError) as err:
        build_params(SCHEMA, flags=["count=three"])
    assert codes(err.value) == ["run.params.value.invalid"]
    assert "'three' is not an integer" in err.value.problems[0].message


def test_arrays_are_given_whole_or_element_by_element_in_order() -> None:
    assert build_params(SCHEMA, flags=['regions=["a","b"]', "regions[1]=c", "regions[]=d"]) == {
        "regions": ["a", "c", "d"]
    }
    assert build_params(SCHEMA, flags=["targets[0].host=x", "targets[1].host=y"]) == {
        "targets": [{"host": "x"}, {"host": "y"}]
    }


def test_an_index_past_the_end_names_the_gap() -> None:
    with pytest.raises(ProblemsError) as err:
        build_params(SCHEMA, flags=["regions[0]=a", "regions[2]=c"])
    message = err.value.problems[0].message
    assert "index 2 would leave a gap" in message and "the next is [1]" in message


def test_an_undeclared_path_is_refused_with_its_location_and_the_names_there() -> None:
    with pytest.raises(ProblemsError) as err:
        build_params(SCHEMA, flags=["cuont=3", "server.tls.verfy=true"])
    assert codes(err.value) == ["run.params.path.unknown", "run.params.path.unknown"]
    first, second = err.value.problems
    assert first.location == "params.cuont" and "count" in first.message
    assert second.location == "params.server.tls.verfy" and "verify" in second.message


def test_open_maps_take_any_key() -> None:
    assert build_params(SCHEMA, flags=["labels.team=data"]) == {"labels": {"team": "data"}}


def test_files_deep_merge_then_flags_override(tmp_path: Path) -> None:
    one, two = tmp_path / "one.yaml", tmp_path / "two.json"
    one.write_text("server: {host: a, tls: {verify: true}}\nregions: [x, y]\n")
    two.write_text('{"server": {"host": "b"}, "regions": ["z"]}')
    got = build_params(SCHEMA, files=[one, two], flags=["server.tls.verify=false"])
    assert got == {"server": {"host": "b", "tls": {"verify": False}}, "regions": ["z"]}


def test_a_pipeline_without_params_refuses_every_flag() -> None:
    with pytest.raises(ProblemsError) as err:
        build_params(None, flags=["a=1"])
    assert codes(err.value) == ["run.params.undeclared"]


def test_every_mistake_is_reported_at_once(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("- not a mapping\n")
    with pytest.raises(ProblemsError) as err:
        build_params(SCHEMA, files=[bad], flags=["nope=1", "novalue"])
    assert codes(err.value) == [
        "run.params.file.invalid",
        "run.params.path.unknown",
        "run.params.flag.invalid",
    ]
