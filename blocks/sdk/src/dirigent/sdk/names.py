"""Names: the two identifier grammars every other layer agrees on.

Why here: entity names (pipelines, schedules, webhooks, connections) become Kubernetes
object names, so they must be DNS labels; step names are read inside expressions such as
``${steps.load.output}``, so they must be identifiers. The engine, the operator's CRD
generator, the API and third-party blocks all validate against these definitions, so they
live in the tiny SDK that everybody already imports.

Step names: ``STEP_NAME_PATTERN`` deliberately allows trailing and doubled underscores
(``load_``, ``load__raw``). They are harmless inside ``${steps.x}`` and forbidding them
would only add rules a person has to learn; what matters is a lowercase ASCII letter first
and only ``[a-z0-9_]`` after it.

Both patterns are written so that Python ``re``, Rust ``regex`` (pydantic-core), Go RE2
(Kubernetes CRD validation) and ECMA-262 (JSON Schema) read them the same way. In Python
they must be applied with ``re.fullmatch``: ``$`` alone would accept a trailing newline.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final

from pydantic import AfterValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

__all__ = [
    "BLOCK_ID_MAX_LENGTH",
    "BLOCK_ID_PATTERN",
    "ENTITY_NAME_MAX_LENGTH",
    "ENTITY_NAME_PATTERN",
    "NAMESPACE_PATTERN",
    "STEP_NAME_MAX_LENGTH",
    "STEP_NAME_PATTERN",
    "BlockId",
    "EntityName",
    "StepName",
    "entity_name_problem",
    "is_block_id",
    "is_entity_name",
    "is_step_name",
    "step_name_problem",
]

ENTITY_NAME_PATTERN: Final = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
"""A DNS label (RFC 1123) that also starts with a letter."""

ENTITY_NAME_MAX_LENGTH: Final = 63

NAMESPACE_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
"""A Kubernetes namespace: a DNS label (RFC 1123), which may start with a digit."""

STEP_NAME_PATTERN: Final = r"^[a-z][a-z0-9_]*$"
"""snake_case: a lowercase letter, then lowercase letters, digits and underscores."""

STEP_NAME_MAX_LENGTH: Final = 63

BLOCK_ID_PATTERN: Final = r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$"
"""Dotted snake_case with at least two segments: ``http.request``, ``acme.orders.sync``.

The same grammar names catalogued message codes (``http.status``) and, with one segment
allowed, connection kinds and notifiers (see ``dirigent.sdk.plugins``).
"""

BLOCK_ID_MAX_LENGTH: Final = 128

_ENTITY_RE: Final = re.compile(ENTITY_NAME_PATTERN)
_STEP_RE: Final = re.compile(STEP_NAME_PATTERN)
_BLOCK_ID_RE: Final = re.compile(BLOCK_ID_PATTERN)
_ENTITY_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
_STEP_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


def is_entity_name(s: str) -> bool:
    """True when ``s`` is a valid entity name (a DNS label of at most 63 characters)."""
    return (
        isinstance(s, str)
        and len(s) <= ENTITY_NAME_MAX_LENGTH
        and _ENTITY_RE.fullmatch(s) is not None
    )


def is_step_name(s: str) -> bool:
    """True when ``s`` is a valid step name (snake_case, at most 63 characters)."""
    return (
        isinstance(s, str) and len(s) <= STEP_NAME_MAX_LENGTH and _STEP_RE.fullmatch(s) is not None
    )


def is_block_id(s: str) -> bool:
    """True when ``s`` is a valid block id or message code (dotted snake_case, 2+ segments)."""
    return (
        isinstance(s, str)
        and len(s) <= BLOCK_ID_MAX_LENGTH
        and _BLOCK_ID_RE.fullmatch(s) is not None
    )


def _bad_chars(s: str, allowed: frozenset[str]) -> str:
    seen: list[str] = []
    for ch in s:
        if ch not in allowed and ch not in seen:
            seen.append(ch)
    return ", ".join(repr(ch) for ch in seen)


def entity_name_problem(s: str) -> str | None:
    """Explain why ``s`` is not an entity name, in words a person can act on; None if valid."""
    if is_entity_name(s):
        return None
    if not s:
        return "a name cannot be empty"
    if len(s) > ENTITY_NAME_MAX_LENGTH:
        return f"a name can be at most {ENTITY_NAME_MAX_LENGTH} characters (this is {len(s)})"
    if s.lower() != s and is_entity_name(s.lower()):
        return f"names are lowercase: use {s.lower()!r}"
    bad = _bad_chars(s, _ENTITY_CHARS)
    if bad:
        hint = (
            f"; try {s.replace('_', '-')!r}"
            if "_" in s and is_entity_name(s.replace("_", "-"))
            else ""
        )
        return f"a name may only contain lowercase letters, digits and '-' (found {bad}){hint}"
    if not s[0].isalpha():
        return "a name must start with a lowercase letter"
    return "a name cannot end with '-'"


def step_name_problem(s: str) -> str | None:
    """Explain why ``s`` is not a step name, in words a person can act on; None if valid."""
    if is_step_name(s):
        return None
    if not s:
        return "a step name cannot be empty"
    if len(s) > STEP_NAME_MAX_LENGTH:
        return f"a step name can be at most {STEP_NAME_MAX_LENGTH} characters (this is {len(s)})"
    if s.lower() != s and is_step_name(s.lower()):
        return f"step names are lowercase snake_case: use {s.lower()!r}"
    bad = _bad_chars(s, _STEP_CHARS)
    if bad:
        hint = (
            f"; try {s.replace('-', '_')!r}"
            if "-" in s and is_step_name(s.replace("-", "_"))
            else ""
        )
        return f"a step name may only contain lowercase letters, digits and '_' (found {bad}){hint}"
    return "a step name must start with a lowercase letter"


def _check_entity_name(value: str) -> str:
    problem = entity_name_problem(value)
    if problem is not None:
        raise PydanticCustomError(
            "entity_name",
            "{name} is not a valid name: {problem} (a DNS label such as 'daily-load')",
            {"name": repr(value), "problem": problem},
        )
    return value


def _check_step_name(value: str) -> str:
    problem = step_name_problem(value)
    if problem is not None:
        raise PydanticCustomError(
            "step_name",
            "{name} is not a valid step name: {problem} (snake_case such as 'load_raw')",
            {"name": repr(value), "problem": problem},
        )
    return value


def _check_block_id(value: str) -> str:
    if not is_block_id(value):
        raise PydanticCustomError(
            "block_id",
            "{name} is not a valid block id: use dotted snake_case with at least two parts, "
            "at most {max} characters, such as 'http.request' or 'storage.exists'",
            {"name": repr(value), "max": BLOCK_ID_MAX_LENGTH},
        )
    return value


_ENTITY_SCHEMA: Final[dict[str, Any]] = {
    "type": "string",
    "minLength": 1,
    "maxLength": ENTITY_NAME_MAX_LENGTH,
    "pattern": ENTITY_NAME_PATTERN,
}
_STEP_SCHEMA: Final[dict[str, Any]] = {
    "type": "string",
    "minLength": 1,
    "maxLength": STEP_NAME_MAX_LENGTH,
    "pattern": STEP_NAME_PATTERN,
}

EntityName = Annotated[str, AfterValidator(_check_entity_name), WithJsonSchema(_ENTITY_SCHEMA)]
"""A pipeline / schedule / webhook / connection name: a DNS label, at most 63 characters."""

StepName = Annotated[str, AfterValidator(_check_step_name), WithJsonSchema(_STEP_SCHEMA)]
"""A step name: snake_case, at most 63 characters."""

BlockId = Annotated[
    str,
    AfterValidator(_check_block_id),
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 3,
            "maxLength": BLOCK_ID_MAX_LENGTH,
            "pattern": BLOCK_ID_PATTERN,
        }
    ),
]
"""A block id (``http.request``): dotted snake_case, at least two segments."""
