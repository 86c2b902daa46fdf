"""Resolving ``${...}`` against a run when an attempt is claimed.

A reference standing alone keeps its value's type; inside a longer string it interpolates
(JSON for non-strings). An unknown reference fails the attempt as *rejected* rather than
resolving to empty: an empty string would silently widen whatever the step was about to
fetch. ``$${...}`` yields a literal ``${...}``.

For a fan-out step ``x``, ``${steps.x.output}`` is the list of its items' outputs in item
order (null where an item did not succeed) and ``${steps.x.items}`` its grid of item values.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import JsonValue

from dirigent.engine.shapes.manifests.references import (
    Namespace,
    Reference,
    ReferenceError_,
    Segment,
    StepPart,
    parse_template,
)

NO_ITEM: Any = object()


class UnresolvedReference(Exception):
    """A reference with nothing behind it; fails the attempt as rejected."""

    code = "reference.unresolved"

    def __init__(self, reference: str, why: str) -> None:
        super().__init__(f"{reference} cannot be resolved: {why}")
        self.reference = reference
        self.why = why


class UnmatchedItem(UnresolvedReference):
    """A paired read (``steps.x.item.output``) whose matching item did not succeed: the item
    is skipped, as its match was (seed §6), rather than failed."""

    code = "reference.item.unmatched"


@dataclass
class Scope:
    """Everything a reference of one attempt may read."""

    params: dict[str, Any]
    run_id: int
    scratch: str
    artifacts: str
    window: tuple[datetime, datetime] | None = None
    item: Any = NO_ITEM
    item_index: int | None = None
    outputs: dict[str, Any] = field(default_factory=dict)  # step -> output (list for fan-outs)
    fan_outs: dict[str, list[Any]] = field(default_factory=dict)  # step -> item outputs by index
    grids: dict[str, list[Any]] = field(default_factory=dict)  # step -> item values


def _walk(value: Any, path: tuple[Segment, ...], ref: Reference) -> Any:
    node = value
    for seg in path:
        if isinstance(node, list) and isinstance(seg, int) and 0 <= seg < len(node):
            node = node[seg]
        elif isinstance(node, dict) and str(seg) in node:
            node = node[str(seg)]
        else:
            raise UnresolvedReference(str(ref), f"there is nothing at '{seg}'")
    return node


def resolve_reference(ref: Reference, scope: Scope) -> Any:
    if ref.namespace is Namespace.PARAMS:
        return _walk(scope.params, ref.path, ref)
    if ref.namespace is Namespace.ITEM:
        if scope.item is NO_ITEM:
            raise UnresolvedReference(str(ref), "this step has no forEach item")
        return _walk(scope.item, ref.path, ref)
    if ref.namespace is Namespace.ARTIFACTS:
        return scope.artifacts
    if ref.namespace is Namespace.RUN:
        name = ref.path[0]
        if name == "id":
            return scope.run_id
        if name == "scratch":
            return scope.scratch
        if scope.window is None:
            raise UnresolvedReference(str(ref), "this run has no window")
        return (scope.window[0] if name == "window.start" else scope.window[1]).isoformat()
    assert ref.step is not None
    if ref.part is StepPart.ITEMS:
        if ref.step not in scope.grids:
            raise UnresolvedReference(str(ref), f"step '{ref.step}' has no fan-out grid")
        return scope.grids[ref.step]
    if ref.part is StepPart.ITEM_OUTPUT:
        outputs = scope.fan_outs.get(ref.step)
        index = scope.item_index
        if outputs is None or index is None or index >= len(outputs):
            raise UnresolvedReference(str(ref), f"step '{ref.step}' has no output for this item")
        if outputs[index] is None:
            raise UnmatchedItem(str(ref), f"item {index} of step '{ref.step}' did not succeed")
        return _walk(outputs[index], ref.path, ref)
    if ref.step not in scope.outputs:
        raise UnresolvedReference(str(ref), f"step '{ref.step}' has no output (it did not succeed)")
    return _walk(scope.outputs[ref.step], ref.path, ref)


def resolve_string(text: str, scope: Scope) -> Any:
    if "$" not in text:
        return text
    try:
        template = parse_template(text)
    except ReferenceError_ as err:
        raise UnresolvedReference(text, err.message) from None
    if template.standalone:
        ref = template.parts[0]
        assert isinstance(ref, Reference)
        return resolve_reference(ref, scope)
    out: list[str] = []
    for part in template.parts:
        if isinstance(part, str):
            out.append(part)
        else:
            value = resolve_reference(part, scope)
            out.append(value if isinstance(value, str) else json.dumps(value))
    return "".join(out)


def resolve(value: JsonValue, scope: Scope) -> Any:
    """A config with every reference replaced by its value."""
    if isinstance(value, str):
        return resolve_string(value, scope)
    if isinstance(value, dict):
        return {k: resolve(v, scope) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, scope) for v in value]
    return value
