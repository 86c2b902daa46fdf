"""Run parameters built from ``-p path=value`` and ``-P FILE`` against the pipeline's own schema.

The CLI reads the params schema before it sends anything, so ``-p count=3`` is an integer and
``-p code=3`` a string when the schema says so. Paths are dotted keys for objects and
brackets for arrays — ``server.tls.verify``, ``regions[0]``, ``regions[]`` (append),
``targets[0].host`` — because a dotted ``regions.0`` cannot tell an index from a key "0".

Precedence: the schema's defaults (filled by the engine), then files, then flags in the order
given; objects deep-merge, arrays and scalars replace, a bracketed index sets one element in
place. A path the schema does not declare is refused with its location — stricter than JSON
Schema on purpose: ``-p dya=...`` is a typo, not a new parameter. An index past the end is
refused with the gap it would leave, so a list is built in order or not at all. Whether the
finished value fits the schema (types, enums, required) is the engine's check at run start,
the same at every door.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from dirigent.engine.shapes.problems import Problem, ProblemsError, location, problem

__all__ = ["build_params", "parse_path"]

Part = str | int | None  # a key, an index, or None for "append" ([])
_SEGMENT = re.compile(r"([^.\[\]]+)|\[(\d*)\]|(\.)")
_SCALAR_TYPES = {"integer", "number", "boolean", "null"}
_NOUNS = {
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
    "object": "an object",
    "array": "a list",
}


def parse_path(text: str) -> list[Part]:
    """``a.b[0][].c`` -> ["a", "b", 0, None, "c"]; ValueError names what is wrong."""
    parts: list[Part] = []
    pos, expect_key = 0, True
    while pos < len(text):
        match = _SEGMENT.match(text, pos)
        if match is None:
            raise ValueError(f"{text!r}: unexpected {text[pos]!r} at position {pos + 1}")
        key, index, dot = match.groups()
        if dot:
            if expect_key:
                raise ValueError(f"{text!r}: empty key at position {pos + 1}")
            expect_key = True
        elif key is not None:
            if not expect_key:
                raise ValueError(f"{text!r}: write a '.' before {key!r}")
            parts.append(key)
            expect_key = False
        else:
            if expect_key and parts:
                raise ValueError(f"{text!r}: a '.' must be followed by a key")
            if not parts:
                raise ValueError(f"{text!r}: a path starts with a parameter name")
            parts.append(int(index) if index else None)
            expect_key = False
        pos = match.end()
    if expect_key:
        raise ValueError(f"{text!r}: a path ends with a key or an index")
    return parts


def _resolve(schema: Any, root: dict[str, Any]) -> Any:
    """Follow a local ``$ref`` (``#/$defs/x``) to the schema it names."""
    seen = 0
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and seen < 32:
        ref: str = schema["$ref"]
        if not ref.startswith("#/"):
            return {}
        node: Any = root
        for token in ref[2:].split("/"):
            node = node.get(token.replace("~1", "/").replace("~0", "~"), {}) if node else {}
        schema, seen = node, seen + 1
    return schema


def _child(schema: Any, part: Part, root: dict[str, Any]) -> Any | None:
    """The sub-schema for ``part``; {} when anything goes; None when the schema refuses it."""
    schema = _resolve(schema, root)
    if not isinstance(schema, dict):
        return {}
    branches = [b for key in ("anyOf", "oneOf", "allOf") for b in schema.get(key, [])]
    if branches:
        found = [_child(b, part, root) for b in branches]
        if all(f is None for f in found):
            return None
        return next((f for f in found if f), {})
    if isinstance(part, str):
        props = schema.get("properties")
        if isinstance(props, dict) and part in props:
            return props[part]
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            return extra
        if extra is True or (props is None and schema.get("type") in (None, "object")):
            return {}
        return None
    items = schema.get("items")
    if isinstance(items, dict):
        return items
    return {} if schema.get("type") in (None, "array") else None


def _typed(raw: str, schema: Any, root: dict[str, Any]) -> Any:
    """The value of ``raw`` as the schema types it: text for strings, JSON for the rest."""
    schema = _resolve(schema, root)
    kinds = schema.get("type") if isinstance(schema, dict) else None
    kinds = {kinds} if isinstance(kinds, str) else set(kinds or [])
    if kinds == {"string"}:
        return raw
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        if kinds & (_SCALAR_TYPES | {"object", "array"}) and "string" not in kinds:
            wanted = " or ".join(_NOUNS.get(k, k) for k in sorted(kinds))
            raise ValueError(f"{raw!r} is not {wanted} (JSON)") from None
        return raw
    if "string" in kinds and not isinstance(value, str) and not kinds & _type_of(value):
        return raw
    return value


def _type_of(value: Any) -> set[str]:
    if isinstance(value, bool):
        return {"boolean"}
    if isinstance(value, int):
        return {"integer", "number"}
    if isinstance(value, float):
        return {"number"}
    if value is None:
        return {"null"}
    return (
        {"object"}
        if isinstance(value, dict)
        else {"array"}
        if isinstance(value, list)
        else {"string"}
    )


def _set(target: dict[str, Any], parts: list[Part], value: Any, where: str) -> None:
    """Set one leaf, creating the objects and lists on the way; lists grow only by one."""
    node: Any = target
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        kind: type = list if not last and not isinstance(parts[i + 1], str) else dict
        if isinstance(part, str):
            if last:
                node[part] = value
            elif not isinstance(node.get(part), kind):
                node[part] = kind()
            node = node[part]
            continue
        index = len(node) if part is None else part
        if index > len(node):
            raise ValueError(
                f"{where}: index {index} would leave a gap; {_where(parts[:i])} has "
                f"{len(node)} element(s), so the next is [{len(node)}] (or [] to append)"
            )
        if index == len(node):
            node.append(None)
        if last:
            node[index] = value
        elif not isinstance(node[index], kind):
            node[index] = kind()
        node = node[index]


def _where(parts: list[Part]) -> str:
    return location(*[p if p is not None else "[]" for p in parts]) or "params"


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _declared(schema: dict[str, Any], parts: list[Part]) -> Any | None:
    node: Any = schema
    for part in parts:
        node = _child(node, part, schema)
        if node is None:
            return None
    return node


def _read_file(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise ValueError(f"{path}: cannot read params: {str(err).splitlines()[0]}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a params file holds one mapping of name to value")
    return data


def build_params(
    schema: dict[str, Any] | None, files: Iterable[Path] = (), flags: Iterable[str] = ()
) -> dict[str, Any]:
    """Files deep-merged in order, then each ``path=value``; ProblemsError lists every mistake."""
    params: dict[str, Any] = {}
    problems: list[Problem] = []
    for path in files:
        try:
            params = _merge(params, _read_file(path))
        except ValueError as err:
            problems.append(problem("run.params.file.invalid", str(err), "params"))
    for text in flags:
        found = _flag(schema, params, text)
        if found is not None:
            problems.append(found)
    if problems:
        raise ProblemsError(problems)
    return params


def _flag(schema: dict[str, Any] | None, params: dict[str, Any], text: str) -> Problem | None:
    key, sep, raw = text.partition("=")
    if not sep or not key:
        return problem("run.params.flag.invalid", f"{text!r}: write -p name=value", "params")
    try:
        parts = parse_path(key.strip())
    except ValueError as err:
        return problem("run.params.path.invalid", str(err), "params")
    where = "params." + _where(parts)
    if schema is None:
        return problem(
            "run.params.undeclared",
            f"{where}: this pipeline declares no parameters; remove -p {key}",
            "params",
        )
    sub = _declared(schema, parts)
    if sub is None:
        names = _names(schema, parts[:-1])
        hint = f"; it declares {', '.join(names)}" if names else ""
        return problem(
            "run.params.path.unknown",
            f"'{_where(parts)}' is not a parameter of this pipeline{hint}",
            "params",
            *[p if p is not None else "[]" for p in parts],
        )
    try:
        _set(params, parts, _typed(raw, sub, schema), where)
    except ValueError as err:
        return problem("run.params.value.invalid", str(err), "params")
    return None


def _names(schema: dict[str, Any], parts: list[Part]) -> list[str]:
    parent = _resolve(_declared(schema, parts), schema)
    props = parent.get("properties") if isinstance(parent, dict) else None
    return sorted(props) if isinstance(props, dict) else []
