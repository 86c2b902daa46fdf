"""Kubernetes conditions: one entry per type, and a transition time that means something.

Invariant: ``lastTransitionTime`` changes only when a condition's ``status`` changes; a new
reason or message on the same status keeps the old time, so ``kubectl describe`` answers
"since when has this been failing", not "when did the operator last look".
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["condition", "now", "set_condition"]

Condition = dict[str, Any]


def now() -> str:
    """The current time as Kubernetes writes it (RFC 3339, UTC, seconds)."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def condition(
    type_: str, ok: bool | None, reason: str, message: str, generation: int | None = None
) -> Condition:
    status = "Unknown" if ok is None else ("True" if ok else "False")
    out: Condition = {"type": type_, "status": status, "reason": reason, "message": message}
    if generation is not None:
        out["observedGeneration"] = generation
    return out


def set_condition(existing: Iterable[Mapping[str, Any]] | None, new: Condition) -> list[Condition]:
    """``existing`` with ``new`` in place of its type, keeping the transition time if unchanged."""
    out: list[Condition] = []
    placed = False
    for old in existing or ():
        if old.get("type") != new["type"]:
            out.append(dict(old))
            continue
        same = old.get("status") == new["status"] and old.get("lastTransitionTime")
        out.append({**new, "lastTransitionTime": old["lastTransitionTime"] if same else now()})
        placed = True
    if not placed:
        out.append({**new, "lastTransitionTime": now()})
    return out
