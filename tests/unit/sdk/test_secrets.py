"""Redacting known secret values from text, and describing a refusal without its input."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from urllib.parse import quote

import pytest
from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError, model_validator

from dirigent.sdk import (
    REDACTED,
    redact,
    redact_json,
    redacting,
    secret_values,
    validation_summary,
)

SECRET = 's3cr3t/t0ken+with "quotes"'


def test_every_occurrence_and_every_travelling_form_is_redacted() -> None:
    text = (
        f"plain {SECRET}; url ?t={quote(SECRET, safe='')}; "
        f"json {json.dumps({'t': SECRET})}; again {SECRET}"
    )
    out = redact(text, [SECRET])
    assert SECRET not in out and quote(SECRET, safe="") not in out
    assert json.dumps(SECRET)[1:-1] not in out
    assert out.count(REDACTED) == 4


def test_a_secret_containing_another_is_replaced_whole() -> None:
    assert redact("key=abcdef", ["abc", "abcdef"]) == f"key={REDACTED}"


def test_empty_secrets_change_nothing() -> None:
    assert redact("nothing to hide", ["", ""]) == "nothing to hide"


def test_json_is_redacted_at_any_depth_keys_included() -> None:
    data = {"a": [SECRET, {"b": f"x{SECRET}y"}], SECRET: 1, "n": 2}
    out = redact_json(data, [SECRET])
    assert SECRET not in json.dumps(out)
    assert out == {"a": [REDACTED, {"b": f"x{REDACTED}y"}], REDACTED: 1, "n": 2}


class Inner(BaseModel):
    key: SecretStr


class Outer(BaseModel):
    token: SecretStr | None = None
    plain: str = "not secret"
    inner: Inner | None = None
    many: list[SecretStr] = []
    by_name: dict[str, SecretStr] = {}


def test_secret_values_finds_every_secret_str_nested_or_not() -> None:
    model = Outer.model_validate(
        {"token": "t", "inner": {"key": "k"}, "many": ["m1", ""], "by_name": {"x": "d"}}
    )
    assert secret_values(model) == {"t", "k", "m1", "d"}


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    token: SecretStr
    port: int = 1

    @model_validator(mode="after")
    def _quotes_a_value(self) -> Strict:
        if self.port == 2:
            raise ValueError(f"port 2 is refused with token {self.token.get_secret_value()}")
        return self


@pytest.mark.parametrize(
    "values",
    [
        {"token": "ok", "apiKey": SECRET},  # a secret under a field the model does not have
        {"token": ["a", SECRET]},  # a secret in a value of the wrong type
        {"token": SECRET, "port": 2},  # a validator's error: input is the whole dict
    ],
)
def test_a_refusal_is_described_without_the_input(values: dict[str, object]) -> None:
    with pytest.raises(ValidationError) as refused:
        Strict.model_validate(values)
    assert SECRET in str(refused.value)  # what pydantic's own text gives away
    summary = validation_summary(refused.value, [SECRET])
    assert SECRET not in summary
    assert summary  # says where and what, e.g. "apiKey: Extra inputs are not permitted"


def test_the_summary_names_the_location_and_the_problem() -> None:
    with pytest.raises(ValidationError) as refused:
        Strict.model_validate({"token": "ok", "apiKey": SECRET})
    assert validation_summary(refused.value) == "apiKey: Extra inputs are not permitted"


async def _chunks(data: bytes, size: int) -> AsyncIterator[bytes]:
    for at in range(0, len(data), size):
        yield data[at : at + size]


@pytest.mark.parametrize("size", [1, 3, 7, 64, 4096])
async def test_a_stream_is_redacted_even_where_a_secret_spans_chunks(size: int) -> None:
    body = (f"head {SECRET} middle {quote(SECRET, safe='')} " * 20 + "tail").encode()
    out = b"".join([c async for c in redacting(_chunks(body, size), [SECRET])])
    assert SECRET.encode() not in out and quote(SECRET, safe="").encode() not in out
    assert out == redact(body.decode(), [SECRET]).encode()


async def test_a_stream_without_secrets_passes_unchanged() -> None:
    body = b"x" * 10_000
    assert b"".join([c async for c in redacting(_chunks(body, 333), [])]) == body
