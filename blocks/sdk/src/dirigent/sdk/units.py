"""Units: ``Duration`` and ``Size``, the two quantities people write in pipeline documents.

Why a value type and not ``int`` / ``timedelta``: a document says ``timeout: 5m`` and
``maxSize: 64mb``; the engine wants exact integers; the API and the CRD want the same
canonical text back. One type parses every accepted spelling, stores an exact integer,
renders one canonical string, and carries its own pydantic and JSON schema so a model field
``timeout: Duration`` just works in the manifest models, the catalog and the generated CRDs.

Duration grammar (strings; surrounding whitespace ignored, units lowercase)::

    bare seconds   "90", "1.5", "0.250"   (at most 3 decimals: whole milliseconds)
    components     [<n>d][<n>h][<n>m][<n>s][<n>ms]   n a non-negative integer,
                   at least one component, units in that order, each at most once

``d`` is exactly 24 hours (a duration, not a calendar day: no DST). Fractions are allowed
only on bare seconds (``"1.5h"`` is refused; write ``"1h30m"``), which keeps the grammar
regular and the JSON-schema pattern exact. Ints are seconds; floats are seconds and must
land on a whole millisecond. Canonical form: largest units first, zero components omitted,
zero is ``"0s"``; 90s -> ``"1m30s"``, 1500ms -> ``"1s500ms"``, 36h -> ``"1d12h"``.

Size grammar (strings; case-insensitive)::

    bare bytes     "1024"
    number + unit  "64mb", "1.5gb", "512KiB"   units b, kb, mb, gb, tb (powers of 1024);
                   kib, mib, gib, tib are synonyms of kb, mb, gb, tb

A fractional value must come to whole bytes (``"1.5kb"`` is 1536 bytes, ``"1.3b"`` is
refused). Canonical form: the largest unit in which the value is a whole number, lowercase:
1536 -> ``"1536b"``, 1048576 -> ``"1mb"``, 1610612736 -> ``"1536mb"``, 0 -> ``"0b"``.

Both JSON schemas have the shape Kubernetes allows for a structural int-or-string field:
``x-kubernetes-int-or-string: true`` with ``anyOf: [{type: integer}, {type: string}]``, and
the value checks (``pattern`` for strings, ``minimum`` for integers) beside the ``anyOf``
where JSON Schema applies each only to its own type.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import re
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, Final, final

from pydantic_core import PydanticCustomError, core_schema

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
    from pydantic.json_schema import JsonSchemaValue

__all__ = ["DURATION_PATTERN", "SIZE_PATTERN", "Duration", "Size"]

_MS_PER: Final[dict[str, int]] = {
    "d": 86_400_000,
    "h": 3_600_000,
    "m": 60_000,
    "s": 1_000,
    "ms": 1,
}
_DURATION_UNITS: Final = ("d", "h", "m", "s", "ms")  # canonical order, largest first


def _duration_components_pattern() -> str:
    # "At least one component, in order" without lookahead (RE2 and Rust regex have none):
    # alternate on which unit comes first, the later ones optional.
    alternatives = []
    for i, first in enumerate(_DURATION_UNITS):
        rest = "".join(f"([0-9]+{u})?" for u in _DURATION_UNITS[i + 1 :])
        alternatives.append(f"[0-9]+{first}{rest}")
    return "(" + "|".join(alternatives) + ")"


DURATION_PATTERN: Final = r"^([0-9]+(\.[0-9]{1,3})?|" + _duration_components_pattern() + ")$"
"""Exactly the strings ``Duration.parse`` accepts (after stripping surrounding whitespace)."""

_BARE_SECONDS_RE: Final = re.compile(r"[0-9]+(\.[0-9]{1,3})?")
_COMPONENT_RE: Final = re.compile(r"([0-9]+)(ms|d|h|m|s)")

_BYTES_PER: Final[dict[str, int]] = {
    "b": 1,
    "kb": 1024,
    "mb": 1024**2,
    "gb": 1024**3,
    "tb": 1024**4,
}
_SIZE_SYNONYMS: Final[dict[str, str]] = {"kib": "kb", "mib": "mb", "gib": "gb", "tib": "tb"}
_SIZE_RENDER_ORDER: Final = ("tb", "gb", "mb", "kb")

SIZE_PATTERN: Final = r"^[0-9]+(\.[0-9]+)?([bB]|[kKmMgGtT][iI]?[bB])?$"
"""The strings ``Size.parse`` may accept; a fraction must also come to whole bytes."""

_SIZE_RE: Final = re.compile(r"([0-9]+(?:\.[0-9]+)?)([a-z]*)")


def _int_or_string_schema(pattern: str, description: str) -> dict[str, Any]:
    return {
        "x-kubernetes-int-or-string": True,
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": pattern,
        "minimum": 0,
        "description": description,
    }


def _refuse(kind: str, value: object, why: str) -> ValueError:
    return ValueError(f"{value!r} is not a valid {kind}: {why}")


@final
@functools.total_ordering
class Duration:
    """A non-negative span of time with millisecond precision.

    Build with ``Duration.parse("1h30m")``, ``Duration(milliseconds=1500)`` or
    ``Duration.of(minutes=5)``. Immutable, hashable, totally ordered; ``str()`` is the
    canonical form. As a pydantic field it accepts every spelling ``parse`` accepts and
    serialises to the canonical string in JSON mode.
    """

    __slots__ = ("_ms",)
    _ms: int

    def __init__(self, milliseconds: int) -> None:
        if isinstance(milliseconds, bool) or not isinstance(milliseconds, int):
            raise TypeError("Duration(milliseconds=...) takes an int")
        if milliseconds < 0:
            raise ValueError("a duration cannot be negative")
        object.__setattr__(self, "_ms", milliseconds)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Duration is immutable")

    @classmethod
    def of(
        cls,
        *,
        days: int = 0,
        hours: int = 0,
        minutes: int = 0,
        seconds: int = 0,
        milliseconds: int = 0,
    ) -> Duration:
        """Build from whole components: ``Duration.of(hours=1, minutes=30)``."""
        return cls(
            days * _MS_PER["d"]
            + hours * _MS_PER["h"]
            + minutes * _MS_PER["m"]
            + seconds * _MS_PER["s"]
            + milliseconds
        )

    @classmethod
    def parse(cls, value: object) -> Duration:
        """Parse a string, int (seconds), float (seconds), ``timedelta`` or ``Duration``.

        Raises ``ValueError`` with a message naming the problem and the accepted forms.
        """
        if isinstance(value, Duration):
            return value
        if isinstance(value, bool):
            raise _refuse("duration", value, "expected a string like '5m' or seconds")
        if isinstance(value, int):
            if value < 0:
                raise _refuse("duration", value, "a duration cannot be negative")
            return cls(value * 1000)
        if isinstance(value, float):
            return cls(_float_seconds_to_ms(value))
        if isinstance(value, dt.timedelta):
            return cls(_timedelta_to_ms(value))
        if isinstance(value, str):
            return cls(_parse_duration_text(value))
        raise _refuse(
            "duration", value, f"expected a string like '5m' or seconds, not {type(value).__name__}"
        )

    @property
    def milliseconds(self) -> int:
        """The exact length in milliseconds."""
        return self._ms

    def total_seconds(self) -> float:
        """The length in seconds, as ``timedelta.total_seconds`` would give it."""
        return self._ms / 1000

    def to_timedelta(self) -> dt.timedelta:
        """The same span as a ``datetime.timedelta``."""
        return dt.timedelta(milliseconds=self._ms)

    def __str__(self) -> str:
        if self._ms == 0:
            return "0s"
        rest = self._ms
        parts: list[str] = []
        for unit in _DURATION_UNITS:
            count, rest = divmod(rest, _MS_PER[unit])
            if count:
                parts.append(f"{count}{unit}")
        return "".join(parts)

    def __repr__(self) -> str:
        return f"Duration({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Duration):
            return self._ms == other._ms
        return NotImplemented

    def __hash__(self) -> int:
        return hash((Duration, self._ms))

    def __lt__(self, other: Duration) -> bool:
        if isinstance(other, Duration):
            return self._ms < other._ms
        return NotImplemented

    def __bool__(self) -> bool:
        return self._ms != 0

    def __reduce__(self) -> tuple[type[Duration], tuple[int]]:
        return (Duration, (self._ms,))

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            _pydantic_validator(cls.parse, "duration"),
            serialization=core_schema.plain_serializer_function_ser_schema(str, when_used="json"),
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return _int_or_string_schema(
            DURATION_PATTERN,
            "A duration: seconds as an integer, or a string such as '30s', '5m', '1h30m', "
            "'250ms', '1d'.",
        )


@final
@functools.total_ordering
class Size:
    """A non-negative number of bytes.

    Build with ``Size.parse("64mb")`` or ``Size(bytes=1024)``. Immutable, hashable, totally
    ordered; ``str()`` is the canonical form (largest unit that keeps a whole number). As a
    pydantic field it accepts every spelling ``parse`` accepts and serialises to the
    canonical string in JSON mode.
    """

    __slots__ = ("_bytes",)
    _bytes: int

    def __init__(self, bytes: int) -> None:
        if isinstance(bytes, bool) or not isinstance(bytes, int):
            raise TypeError("Size(bytes=...) takes an int")
        if bytes < 0:
            raise ValueError("a size cannot be negative")
        object.__setattr__(self, "_bytes", bytes)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Size is immutable")

    @classmethod
    def parse(cls, value: object) -> Size:
        """Parse a string, an int (bytes) or a ``Size``.

        Raises ``ValueError`` with a message naming the problem and the accepted forms.
        """
        if isinstance(value, Size):
            return value
        if isinstance(value, bool):
            raise _refuse("size", value, "expected a string like '64mb' or bytes")
        if isinstance(value, int):
            if value < 0:
                raise _refuse("size", value, "a size cannot be negative")
            return cls(value)
        if isinstance(value, float):
            if math.isfinite(value) and value >= 0 and value.is_integer():
                return cls(int(value))
            raise _refuse("size", value, "a size in bytes must be a whole, non-negative number")
        if isinstance(value, str):
            return cls(_parse_size_text(value))
        raise _refuse(
            "size", value, f"expected a string like '64mb' or bytes, not {type(value).__name__}"
        )

    @property
    def bytes(self) -> int:
        """The exact number of bytes."""
        return self._bytes

    def __int__(self) -> int:
        return self._bytes

    def __str__(self) -> str:
        if self._bytes == 0:
            return "0b"
        for unit in _SIZE_RENDER_ORDER:
            count, rest = divmod(self._bytes, _BYTES_PER[unit])
            if rest == 0:
                return f"{count}{unit}"
        return f"{self._bytes}b"

    def __repr__(self) -> str:
        return f"Size({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Size):
            return self._bytes == other._bytes
        return NotImplemented

    def __hash__(self) -> int:
        return hash((Size, self._bytes))

    def __lt__(self, other: Size) -> bool:
        if isinstance(other, Size):
            return self._bytes < other._bytes
        return NotImplemented

    def __bool__(self) -> bool:
        return self._bytes != 0

    def __reduce__(self) -> tuple[type[Size], tuple[int]]:
        return (Size, (self._bytes,))

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            _pydantic_validator(cls.parse, "size"),
            serialization=core_schema.plain_serializer_function_ser_schema(str, when_used="json"),
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return _int_or_string_schema(
            SIZE_PATTERN,
            "A size: bytes as an integer, or a string such as '512kb', '64mb', '1.5gb' "
            "(powers of 1024).",
        )


def _pydantic_validator(parse: Any, kind: str) -> Any:
    # Re-raise as a custom error so the message is ours, not "Value error, ...".
    def validate(value: object) -> object:
        try:
            return parse(value)
        except (ValueError, TypeError) as exc:
            raise PydanticCustomError(kind, "{reason}", {"reason": str(exc)}) from exc

    return validate


_DURATION_FORMS: Final = (
    "use seconds ('90', '1.5') or components in the order d, h, m, s, ms "
    "('30s', '5m', '1h30m', '250ms', '1d')"
)


def _parse_duration_text(raw: str) -> int:
    text = raw.strip()
    if not text:
        raise _refuse("duration", raw, f"it is empty; {_DURATION_FORMS}")
    if text.startswith("-"):
        raise _refuse("duration", raw, "a duration cannot be negative")
    if _BARE_SECONDS_RE.fullmatch(text):
        return int(Decimal(text) * 1000)
    total = 0
    pos = 0
    last_rank = -1
    for match in _COMPONENT_RE.finditer(text):
        if match.start() != pos:
            break
        number, unit = match.groups()
        rank = _DURATION_UNITS.index(unit)
        if rank <= last_rank:
            raise _refuse(
                "duration",
                raw,
                f"'{unit}' is out of order or repeated; units go d, h, m, s, ms, each once",
            )
        last_rank = rank
        total += int(number) * _MS_PER[unit]
        pos = match.end()
    if pos == len(text):
        return total
    rest = text[pos:]
    if re.fullmatch(r"[0-9]+\.[0-9]{4,}", text):
        why = "it is finer than a millisecond (at most 3 decimals on seconds)"
    elif re.match(r"[0-9]*\.[0-9]", rest):
        why = "fractions are only allowed on bare seconds ('1.5'); write '1h30m', not '1.5h'"
    elif m := re.match(r"[0-9]+([A-Za-z]+)", rest):
        unit = m.group(1)
        why = (
            f"units are lowercase; use {unit.lower()!r}"
            if unit.lower() in _MS_PER
            else f"unknown unit {unit!r}; {_DURATION_FORMS}"
        )
    else:
        why = _DURATION_FORMS
    raise _refuse("duration", raw, why)


def _float_seconds_to_ms(value: float) -> int:
    if not math.isfinite(value):
        raise _refuse("duration", value, "it must be a finite number of seconds")
    if value < 0:
        raise _refuse("duration", value, "a duration cannot be negative")
    # repr() is the shortest string that round-trips, so 1.005 means 1.005, not 1.00499...
    ms = Decimal(repr(value)) * 1000
    if ms != ms.to_integral_value():
        raise _refuse("duration", value, "it is finer than a millisecond")
    return int(ms)


def _timedelta_to_ms(value: dt.timedelta) -> int:
    if value < dt.timedelta(0):
        raise _refuse("duration", value, "a duration cannot be negative")
    if value.microseconds % 1000:
        raise _refuse("duration", value, "it is finer than a millisecond")
    return (value.days * 86_400 + value.seconds) * 1000 + value.microseconds // 1000


_SIZE_FORMS: Final = "use bytes ('1024') or a number with b, kb, mb, gb or tb ('64mb', '1.5gb')"


def _parse_size_text(raw: str) -> int:
    text = raw.strip().lower()
    if not text:
        raise _refuse("size", raw, f"it is empty; {_SIZE_FORMS}")
    if text.startswith("-"):
        raise _refuse("size", raw, "a size cannot be negative")
    match = _SIZE_RE.fullmatch(text)
    if match is None:
        raise _refuse("size", raw, _SIZE_FORMS)
    number, unit = match.groups()
    unit = _SIZE_SYNONYMS.get(unit, unit) or "b"
    if unit not in _BYTES_PER:
        raise _refuse("size", raw, f"unknown unit {match.group(2)!r}; {_SIZE_FORMS}")
    try:
        amount = Decimal(number) * _BYTES_PER[unit]
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only decimals
        raise _refuse("size", raw, _SIZE_FORMS) from exc
    if amount != amount.to_integral_value():
        raise _refuse("size", raw, "it is not a whole number of bytes")
    return int(amount)
