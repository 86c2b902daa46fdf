"""The reference language: ``${...}`` inside step config, parsed once into a structure.

There are no expressions, loops or conditionals: a reference names a value and nothing
else, which keeps a document reviewable. Five namespaces::

    ${params.<name>[.<key>|.<index>]...}
    ${steps.<step>.output[.<key>]...}   ${steps.<step>.items}   ${steps.<step>.item.output[...]}
    ${item[.<key>]...}
    ${run.id}  ${run.scratch}  ${run.window.start}  ${run.window.end}
    ${artifacts}

A string that is exactly one reference keeps the referenced value's type (``"${params.n}"``
is an integer downstream); a reference inside a longer string interpolates. ``$${...}``
is the escape: it yields the literal ``${...}``, is never resolved and never checked.

Parsing is separate from resolving: the manifest layer parses and checks references
against the document (which steps exist, which are upstream); the runtime resolves the
parsed structure against stored outputs when an attempt is claimed.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator
from dataclasses import dataclass

from pydantic import JsonValue


class Namespace(enum.StrEnum):
    PARAMS = "params"
    STEPS = "steps"
    ITEM = "item"
    RUN = "run"
    ARTIFACTS = "artifacts"


class StepPart(enum.StrEnum):
    """What a ``steps.<name>.*`` reference reads."""

    OUTPUT = "output"  # steps.x.output...
    ITEMS = "items"  # steps.x.items: the fan-out grid of x
    ITEM_OUTPUT = "item.output"  # steps.x.item.output...: x's output for the paired item


RUN_FIELDS = ("id", "scratch", "window.start", "window.end")

Segment = str | int


class ReferenceError_(ValueError):
    """A ``${...}`` that does not parse. Carries a stable code and the offending text."""

    def __init__(self, code: str, message: str, text: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.text = text


@dataclass(frozen=True)
class Reference:
    """One parsed ``${...}``."""

    raw: str  # the text between the braces
    namespace: Namespace
    step: str | None = None  # for steps.*
    part: StepPart | None = None  # for steps.*
    path: tuple[Segment, ...] = ()  # keys / indexes after the fixed prefix; run: the field

    def __str__(self) -> str:
        return "${" + self.raw + "}"


@dataclass(frozen=True)
class Template:
    """A string with references: literal text and references, in order.

    ``standalone`` is true when the whole string is one reference: it then resolves to the
    referenced value itself rather than to text.
    """

    parts: tuple[str | Reference, ...]

    @property
    def standalone(self) -> bool:
        return len(self.parts) == 1 and isinstance(self.parts[0], Reference)

    @property
    def references(self) -> tuple[Reference, ...]:
        return tuple(p for p in self.parts if isinstance(p, Reference))


_TOKEN = re.compile(r"\$\$\{|\$\{([^{}]*)\}")
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def _segments(text: str, raw: str) -> tuple[Segment, ...]:
    if text == "":
        return ()
    out: list[Segment] = []
    for seg in text.split("."):
        if seg.isdigit():
            out.append(int(seg))
        elif _KEY.match(seg):
            out.append(seg)
        else:
            raise ReferenceError_(
                "reference.syntax",
                f"'${{{raw}}}' has an invalid path segment {seg!r}: segments are keys "
                "(letters, digits, _ and -) or list indexes, separated by dots",
                raw,
            )
    return tuple(out)


def parse_reference(raw: str) -> Reference:
    """Parse the text between ``${`` and ``}``."""
    body = raw.strip()
    if body != raw or not body:
        raise ReferenceError_(
            "reference.syntax",
            f"'${{{raw}}}' is empty or padded with spaces: write ${{params.name}}",
            raw,
        )
    head, _, rest = body.partition(".")
    try:
        ns = Namespace(head)
    except ValueError:
        raise ReferenceError_(
            "reference.namespace",
            f"'${{{raw}}}' names an unknown namespace {head!r}: use one of "
            "params, steps, item, run, artifacts",
            raw,
        ) from None
    if ns is Namespace.ARTIFACTS:
        if rest:
            raise ReferenceError_(
                "reference.syntax",
                f"'${{{raw}}}': ${{artifacts}} takes no path; write ${{artifacts}}/your/path instead",
                raw,
            )
        return Reference(raw=raw, namespace=ns)
    if ns is Namespace.RUN:
        if rest not in RUN_FIELDS:
            raise ReferenceError_(
                "reference.run_field",
                f"'${{{raw}}}' is not a run field: use run.id, run.scratch, run.window.start "
                "or run.window.end",
                raw,
            )
        return Reference(raw=raw, namespace=ns, path=(rest,))
    if ns is Namespace.ITEM:
        return Reference(raw=raw, namespace=ns, path=_segments(rest, raw))
    if ns is Namespace.PARAMS:
        path = _segments(rest, raw)
        if not path or not isinstance(path[0], str):
            raise ReferenceError_(
                "reference.syntax", f"'${{{raw}}}' must name a parameter: ${{params.<name>}}", raw
            )
        return Reference(raw=raw, namespace=ns, path=path)
    # steps.<name>.output... | steps.<name>.items | steps.<name>.item.output...
    step, _, tail = rest.partition(".")
    if not step or not tail:
        raise ReferenceError_(
            "reference.syntax",
            f"'${{{raw}}}' must read steps.<step>.output, steps.<step>.items or "
            "steps.<step>.item.output",
            raw,
        )
    if tail == "output" or tail.startswith("output."):
        return Reference(raw, ns, step, StepPart.OUTPUT, _segments(tail[len("output.") :], raw))
    if tail == "items":
        return Reference(raw, ns, step, StepPart.ITEMS)
    if tail == "item.output" or tail.startswith("item.output."):
        return Reference(
            raw, ns, step, StepPart.ITEM_OUTPUT, _segments(tail[len("item.output.") :], raw)
        )
    raise ReferenceError_(
        "reference.syntax",
        f"'${{{raw}}}' must read steps.<step>.output, steps.<step>.items or steps.<step>.item.output",
        raw,
    )


def parse_template(text: str) -> Template:
    """Split a string into literal text and references; ``$${`` yields a literal ``${``."""
    parts: list[str | Reference] = []
    literal = ""
    pos = 0
    for m in _TOKEN.finditer(text):
        literal += text[pos : m.start()]
        pos = m.end()
        if m.group(0) == "$${":
            literal += "${"
            continue
        if literal:
            parts.append(literal)
            literal = ""
        parts.append(parse_reference(m.group(1)))
    literal += text[pos:]
    if literal:
        parts.append(literal)
    return Template(tuple(parts))


def has_references(text: str) -> bool:
    """True when a string holds at least one resolvable ``${...}`` (escapes do not count)."""
    return any(m.group(0) != "$${" for m in _TOKEN.finditer(text))


def walk_strings(
    value: JsonValue, path: tuple[Segment, ...] = ()
) -> Iterator[tuple[tuple[Segment, ...], str]]:
    """Every string inside a JSON value, with its path."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, sub in value.items():
            yield from walk_strings(sub, (*path, key))
    elif isinstance(value, list):
        for index, sub in enumerate(value):
            yield from walk_strings(sub, (*path, index))


def find_references(
    value: JsonValue,
) -> Iterator[tuple[tuple[Segment, ...], Reference | ReferenceError_]]:
    """Every reference inside a JSON value with its path; parse errors are yielded, not raised."""
    for path, text in walk_strings(value):
        if "${" not in text:
            continue
        try:
            template = parse_template(text)
        except ReferenceError_ as err:
            yield path, err
            continue
        for ref in template.references:
            yield path, ref
