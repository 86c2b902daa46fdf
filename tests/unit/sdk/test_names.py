"""Names: the grammars accept exactly the DNS-label and snake_case languages."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from dirigent.sdk.names import (
    ENTITY_NAME_PATTERN,
    STEP_NAME_PATTERN,
    EntityName,
    StepName,
    entity_name_problem,
    is_entity_name,
    is_step_name,
    step_name_problem,
)


class Named(BaseModel):
    name: EntityName
    step: StepName = "s"


def _is_dns_label(s: str) -> bool:
    # An independent statement of the language, not the regex read back.
    return (
        1 <= len(s) <= 63
        and all(c in "abcdefghijklmnopqrstuvwxyz0123456789-" for c in s)
        and s[0].isascii()
        and s[0].isalpha()
        and s[-1] != "-"
    )


def _is_snake(s: str) -> bool:
    return (
        1 <= len(s) <= 63
        and all(c in "abcdefghijklmnopqrstuvwxyz0123456789_" for c in s)
        and s[0] in "abcdefghijklmnopqrstuvwxyz"
    )


_ALPHABET = st.sampled_from(list("abcxyz019-_ AZ.\n\tÅé/$"))
_nameish = st.text(_ALPHABET, max_size=70)


@settings(deadline=None)
@given(st.from_regex(ENTITY_NAME_PATTERN, fullmatch=True).filter(lambda s: len(s) <= 63))
def test_generated_entity_names_are_accepted(s: str) -> None:
    assert is_entity_name(s)
    assert entity_name_problem(s) is None
    assert Named(name=s).name == s


@settings(deadline=None)
@given(st.from_regex(STEP_NAME_PATTERN, fullmatch=True).filter(lambda s: len(s) <= 63))
def test_generated_step_names_are_accepted(s: str) -> None:
    assert is_step_name(s)
    assert step_name_problem(s) is None
    assert Named(name="a", step=s).step == s


@settings(deadline=None)
@given(st.one_of(_nameish, st.text(max_size=80)))
def test_entity_grammar_is_exactly_dns_labels(s: str) -> None:
    assert is_entity_name(s) == _is_dns_label(s)
    if not _is_dns_label(s):
        problem = entity_name_problem(s)
        assert problem
        with pytest.raises(ValidationError, match="not a valid name"):
            Named(name=s)


@settings(deadline=None)
@given(st.one_of(_nameish, st.text(max_size=80)))
def test_step_grammar_is_exactly_snake_case(s: str) -> None:
    assert is_step_name(s) == _is_snake(s)
    if not _is_snake(s):
        assert step_name_problem(s)
        with pytest.raises(ValidationError, match="not a valid step name"):
            Named(name="a", step=s)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("", "cannot be empty"),
        ("a" * 64, "at most 63"),
        ("Daily-Load", "use 'daily-load'"),
        ("daily_load", "try 'daily-load'"),
        ("1st", "start with a lowercase letter"),
        ("-x", "start with a lowercase letter"),
        ("abc-", "cannot end with '-'"),
        ("abc\n", "found '\\n'"),
    ],
)
def test_entity_name_messages_say_what_to_do(value: str, fragment: str) -> None:
    problem = entity_name_problem(value)
    assert problem is not None
    assert fragment in problem


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("", "cannot be empty"),
        ("Load", "use 'load'"),
        ("load-raw", "try 'load_raw'"),
        ("_x", "start with a lowercase letter"),
        ("9x", "start with a lowercase letter"),
    ],
)
def test_step_name_messages_say_what_to_do(value: str, fragment: str) -> None:
    problem = step_name_problem(value)
    assert problem is not None
    assert fragment in problem


def test_trailing_and_double_underscores_are_allowed_in_step_names() -> None:
    assert is_step_name("load_")
    assert is_step_name("load__raw")


def test_trailing_newline_is_refused() -> None:
    # Python's `$` matches before a final newline; the checks must not.
    assert re.match(ENTITY_NAME_PATTERN, "abc\n")
    assert not is_entity_name("abc\n")
    assert not is_step_name("abc\n")


def test_json_schema_is_structural() -> None:
    props = Named.model_json_schema()["properties"]
    assert {k: v for k, v in props["name"].items() if k != "title"} == {
        "type": "string",
        "minLength": 1,
        "maxLength": 63,
        "pattern": ENTITY_NAME_PATTERN,
    }
    assert props["step"]["pattern"] == STEP_NAME_PATTERN


def test_non_strings_are_refused() -> None:
    assert not is_entity_name(5)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Named(name=5)
