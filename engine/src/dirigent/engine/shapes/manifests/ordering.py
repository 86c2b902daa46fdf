"""The order many documents are applied in, so each finds what it names already there.

Connections first (Pipelines require them), then Pipelines — each after the Pipelines its
``spec.requires.pipelines`` lists — then Schedules and Webhooks (they name a Pipeline).
Every door that applies a folder at once (``dirigent dev``, ``dirigent apply -f``) uses it;
the operator needs none, since it re-reconciles a dependent when what it waits for is Ready.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, NamedTuple, TypeVar

T = TypeVar("T")

KIND_RANK = {"Connection": 0, "Pipeline": 1, "Schedule": 2, "Webhook": 3}


class Facts(NamedTuple):
    """What ordering needs of one document: its kind, its name, the pipelines it requires."""

    kind: str
    name: str
    requires: Collection[str] = ()


def facts_of(document: Any) -> Facts:
    """The facts of a raw document (a parsed YAML mapping); never raises."""
    if not isinstance(document, dict):
        return Facts("", "")
    meta = document.get("metadata")
    spec = document.get("spec")
    requires = spec.get("requires") if isinstance(spec, dict) else None
    names = requires.get("pipelines") if isinstance(requires, dict) else None
    return Facts(
        str(document.get("kind", "")),
        str(meta.get("name", "")) if isinstance(meta, dict) else "",
        [n for n in names if isinstance(n, str)] if isinstance(names, list) else (),
    )


def apply_order(
    items: Sequence[T], facts: Callable[[T], Facts], tiebreak: Callable[[T], Any]
) -> list[T]:
    """``items`` by kind, then (for Pipelines) by depth of requirement, then ``tiebreak``."""
    known = {f.name: f for f in map(facts, items) if f.kind == "Pipeline"}
    depths: dict[str, int] = {}

    def depth(name: str, seen: frozenset[str]) -> int:
        if name in depths:
            return depths[name]
        below = [
            depth(r, seen | {name}) + 1
            for r in known[name].requires
            if r in known and r not in seen and r != name
        ]
        depths[name] = max(below, default=0)
        return depths[name]

    def key(item: T) -> tuple[int, int, Any]:
        f = facts(item)
        level = depth(f.name, frozenset()) if f.kind == "Pipeline" and f.name in known else 0
        return (KIND_RANK.get(f.kind, 9), level, tiebreak(item))

    return sorted(items, key=key)
