"""From a Kubernetes object to the engine's manifest, and problems back to text and status.

Why: the operator is one more door into the same validation. An object from the API carries
server-written metadata (uid, resourceVersion, managedFields, kopf's annotations) that a
person never writes; it is stripped here, and only here, so every handler and the admission
webhook hand the engine exactly what ``kubectl apply`` was given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dirigent.engine.shapes.manifests.loading import Manifest, parse_manifest
from dirigent.engine.shapes.problems import Problem

__all__ = ["problem_text", "problems_status", "to_manifest"]

# Annotations written by tools, not people: they are not part of the document.
_TOOL_ANNOTATION_PREFIXES = ("kubectl.kubernetes.io/", "kopf.zalando.org/", "dirigent.dev/")


def document(body: Mapping[str, Any]) -> dict[str, Any]:
    """The object as a person wrote it: apiVersion, kind, metadata (name, labels, notes), spec."""
    meta = body.get("metadata", {})
    annotations = {
        k: v
        for k, v in (meta.get("annotations") or {}).items()
        if not k.startswith(_TOOL_ANNOTATION_PREFIXES)
    }
    clean: dict[str, Any] = {"name": meta.get("name")}
    if meta.get("labels"):
        clean["labels"] = dict(meta["labels"])
    if annotations:
        clean["annotations"] = annotations
    return {
        "apiVersion": body.get("apiVersion"),
        "kind": body.get("kind"),
        "metadata": clean,
        "spec": dict(body.get("spec") or {}),
    }


def to_manifest(body: Mapping[str, Any]) -> tuple[Manifest | None, list[Problem]]:
    """The typed manifest of a Kubernetes object, or every structural problem with it."""
    return parse_manifest(document(body))


def problems_status(problems: Sequence[Problem]) -> list[dict[str, str]]:
    """Problems as ``status.problems`` entries."""
    return [{"code": p.code, "location": p.location, "message": p.message} for p in problems]


def problem_text(problems: Sequence[Problem], limit: int = 50) -> str:
    """Every problem on its own line, for an admission refusal or an Event message."""
    lines = [p.render() for p in problems[:limit]]
    if len(problems) > limit:
        lines.append(f"... and {len(problems) - limit} more")
    return "\n".join(lines)
