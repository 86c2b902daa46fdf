"""Units: Duration and Size parse every documented spelling and render one canonical form."""

from __future__ import annotations

import datetime as dt
import pickle
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from dirigent.sdk.units import DURATION_PATTERN, SIZE_PATTERN, Duration, Size

_ms = st.integers(min_value=0, max_value=10**15)
_bytes = st.integers(min_value=0, max_value=10**18)


class Limits(BaseModel):
    timeout: Duration
    max_size: Size = Size(0)


# --- Duration -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("30s", 30_000),
        ("5m", 300_000),
        ("1h30m", 5_400_000),
        ("250ms", 250),
        ("1d", 86_400_000),
        ("1h30m15s500ms", 5_415_500),
        ("90", 90_000),
        ("1.5", 1_500),
        ("0.001", 1),
        ("0", 0),
        ("0s", 0),
        (" 2s ", 2_000),
        ("2d0h", 172_800_000),
        (90, 90_000),
        (1.5, 1_500),
        (1.005, 1_005),
        (dt.timedelta(minutes=2, milliseconds=5), 120_005),
    ],
)
def test_duration_parses(text: object, ms: int) -> None:
    assert Duration.parse(text).milliseconds == ms


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("-5s", "negative"),
        (-1, "negative"),
        (-0.5, "negative"),
        ("5x", "unknown unit 'x'"),
        ("5M", "lowercase"),
        ("1.5h", "only allowed on bare seconds"),
        ("30m1h", "out of order"),
        ("1m1m", "out of order"),
        ("0.0001", "finer than a millisecond"),
        (0.0001, "finer than a millisecond"),
        (float("nan"), "finite"),
        (float("inf"), "finite"),
        (dt.timedelta(microseconds=1), "finer than a millisecond"),
        (dt.timedelta(seconds=-1), "negative"),
        ("abc", "use seconds"),
        ("5 m", "use seconds"),
        ("m", "use seconds"),
        (True, "expected"),
        (None, "expected"),
        ([1], "expected"),
    ],
)
def test_duration_refuses_with_a_reason(value: object, fragment: str) -> None:
    with pytest.raises(ValueError, match=re.escape(fragment)):
        Duration.parse(value)


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "0s"),
        (1, "1ms"),
        (1_500, "1s500ms"),
        (90_000, "1m30s"),
        (3_600_000, "1h"),
        (129_600_000, "1d12h"),
        (86_400_001, "1d1ms"),
    ],
)
def test_duration_renders_canonically(ms: int, text: str) -> None:
    assert str(Duration(ms)) == text


@settings(deadline=None)
@given(_ms)
def test_duration_render_parse_round_trips(ms: int) -> None:
    d = Duration(ms)
    assert Duration.parse(str(d)) == d
    assert re.fullmatch(DURATION_PATTERN, str(d))
    assert Duration.parse(d.milliseconds / 1000 if ms < 2**50 else str(d)) == d


@settings(deadline=None)
@given(st.text(st.sampled_from(list("0123456789dhms.- x")), max_size=16))
def test_duration_parse_render_is_idempotent_and_matches_pattern(text: str) -> None:
    try:
        d = Duration.parse(text)
    except ValueError:
        # The published pattern must refuse what the parser refuses (it is exact).
        assert not re.fullmatch(DURATION_PATTERN, text.strip())
        return
    assert re.fullmatch(DURATION_PATTERN, text.strip())
    assert str(Duration.parse(str(d))) == str(d)


@settings(deadline=None)
@given(
    st.tuples(*(st.one_of(st.none(), st.integers(0, 10_000)) for _ in range(5))).filter(
        lambda parts: any(p is not None for p in parts)
    )
)
def test_duration_components_sum(parts: tuple[int | None, ...]) -> None:
    units = ("d", "h", "m", "s", "ms")
    scale = (86_400_000, 3_600_000, 60_000, 1_000, 1)
    text = "".join(f"{n}{u}" for n, u in zip(parts, units, strict=True) if n is not None)
    expected = sum((n or 0) * k for n, k in zip(parts, scale, strict=True))
    assert Duration.parse(text).milliseconds == expected


def test_duration_value_semantics() -> None:
    a, b = Duration.parse("1m"), Duration.parse("60s")
    assert a == b
    assert hash(a) == hash(b)
    assert a < Duration.parse("61s") <= Duration.parse("2m")
    assert Duration.parse("2m") > a >= b
    assert a != 60_000
    assert len({a, b, Duration(1)}) == 2
    assert a.total_seconds() == 60.0
    assert a.to_timedelta() == dt.timedelta(minutes=1)
    assert Duration.of(hours=1, minutes=30) == Duration.parse("1h30m")
    assert repr(a) == "Duration('1m')"
    assert not Duration(0)
    assert pickle.loads(pickle.dumps(a)) == a
    with pytest.raises(AttributeError):
        a._ms = 5
    with pytest.raises(ValueError, match="negative"):
        Duration(-1)
    with pytest.raises(TypeError):
        Duration(1.5)  # type: ignore[arg-type]


def test_duration_in_a_model() -> None:
    assert Limits(timeout="5m").timeout == Duration(300_000)
    assert Limits(timeout=300).timeout == Duration(300_000)
    m = Limits.model_validate_json('{"timeout": 90, "max_size": "1.5kb"}')
    assert m.model_dump(mode="json") == {"timeout": "1m30s", "max_size": "1536b"}
    assert m.model_dump()["timeout"] == Duration(90_000)
    assert Limits.model_validate(m.model_dump(mode="json")) == m
    with pytest.raises(ValidationError) as info:
        Limits(timeout="soon")
    err = info.value.errors()[0]
    assert err["type"] == "duration"
    assert "'soon' is not a valid duration" in err["msg"]


def test_int_or_string_json_schema_is_structural_for_crds() -> None:
    props = Limits.model_json_schema()["properties"]
    for name, pattern in (("timeout", DURATION_PATTERN), ("max_size", SIZE_PATTERN)):
        schema = props[name]
        assert schema["x-kubernetes-int-or-string"] is True
        assert schema["anyOf"] == [{"type": "integer"}, {"type": "string"}]
        assert schema["pattern"] == pattern
        assert schema["minimum"] == 0
        assert "type" not in schema


def test_patterns_avoid_lookaround_so_go_and_rust_regex_read_them() -> None:
    for pattern in (DURATION_PATTERN, SIZE_PATTERN):
        assert "(?" not in pattern
        assert "\\d" not in pattern


# --- Size ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "n"),
    [
        ("64mb", 64 * 1024**2),
        ("1.5gb", 1536 * 1024**2),
        ("512kb", 512 * 1024),
        ("512KiB", 512 * 1024),
        ("2MiB", 2 * 1024**2),
        ("1GIB", 1024**3),
        ("1tb", 1024**4),
        ("10b", 10),
        ("10B", 10),
        ("1024", 1024),
        ("1.5kb", 1536),
        (" 3mb ", 3 * 1024**2),
        (4096, 4096),
        (4096.0, 4096),
    ],
)
def test_size_parses(text: object, n: int) -> None:
    assert Size.parse(text).bytes == n


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("1.3b", "not a whole number of bytes"),
        ("0.1kb", "not a whole number of bytes"),
        ("1.5", "not a whole number of bytes"),
        ("-1kb", "negative"),
        (-1, "negative"),
        ("", "empty"),
        ("5xb", "unknown unit 'xb'"),
        ("5 mb", "use bytes"),
        ("mb", "use bytes"),
        (1.5, "whole"),
        (True, "expected"),
        (None, "expected"),
    ],
)
def test_size_refuses_with_a_reason(value: object, fragment: str) -> None:
    with pytest.raises(ValueError, match=re.escape(fragment)):
        Size.parse(value)


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0b"),
        (10, "10b"),
        (1024, "1kb"),
        (1536, "1536b"),
        (1048576, "1mb"),
        (1610612736, "1536mb"),
        (1024**4 * 3, "3tb"),
    ],
)
def test_size_renders_in_largest_exact_unit(n: int, text: str) -> None:
    assert str(Size(n)) == text


@settings(deadline=None)
@given(_bytes)
def test_size_render_parse_round_trips(n: int) -> None:
    s = Size(n)
    assert Size.parse(str(s)) == s
    assert re.fullmatch(SIZE_PATTERN, str(s))


@settings(deadline=None)
@given(st.text(st.sampled_from(list("0123456789.kmgtibKMGTIB -x")), max_size=12))
def test_size_parse_render_is_idempotent(text: str) -> None:
    try:
        s = Size.parse(text)
    except ValueError:
        return
    # The pattern admits a superset (it cannot check whole bytes), never less.
    assert re.fullmatch(SIZE_PATTERN, text.strip())
    assert str(Size.parse(str(s))) == str(s)


def test_size_value_semantics() -> None:
    assert Size.parse("1kb") == Size(1024)
    assert hash(Size.parse("1kb")) == hash(Size(1024))
    assert Size(1) < Size(2) <= Size(2) < Size.parse("1kb")
    assert Size(1) != Duration(1)
    assert int(Size(7)) == 7
    assert repr(Size(2048)) == "Size('2kb')"
    assert pickle.loads(pickle.dumps(Size(5))) == Size(5)
    with pytest.raises(ValueError, match="negative"):
        Size(-1)
