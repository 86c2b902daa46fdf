"""Canonical export: one deterministic YAML text per manifest, and its digest.

The digest is what makes an unchanged apply write nothing, so the text must depend on the
meaning of a document and nothing else: model fields in declaration order, defaults
omitted, steps in topological order (alphabetical within a layer), and the keys of opaque
maps (step config, the params schema, connection settings) sorted. Export → load → export is
byte-identical.
"""

from __future__ import annotations

import hashlib
from typing import Any

import yaml

from dirigent.engine.shapes.manifests import dag
from dirigent.engine.shapes.manifests.loading import Manifest
from dirigent.engine.shapes.manifests.pipeline import Pipeline

# Paths (from the manifest root) of opaque maps whose keys are sorted; "*" matches any key.
_OPAQUE_PATHS: dict[str, tuple[tuple[str, ...], ...]] = {
    "Pipeline": (
        ("spec", "params"),
        ("spec", "steps", "*", "config"),
        ("spec", "steps", "*", "forEach"),
    ),
    "Schedule": (("spec", "params"),),
    "Connection": (("spec", "settings"),),
    "Webhook": (),
}


def _sorted_deep(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted_deep(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted_deep(v) for v in value]
    return value


def _apply_at(node: Any, path: tuple[str, ...]) -> None:
    if not path or not isinstance(node, dict):
        return
    head, rest = path[0], path[1:]
    keys = list(node) if head == "*" else [head] if head in node else []
    for key in keys:
        if rest:
            _apply_at(node[key], rest)
        else:
            node[key] = _sorted_deep(node[key])


def canonical_dict(manifest: Manifest) -> dict[str, Any]:
    """The manifest as plain data in canonical order, defaults omitted."""
    data: dict[str, Any] = manifest.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    # apiVersion and kind carry no default but are always written; keep them first.
    data = {"apiVersion": data.pop("apiVersion"), "kind": data.pop("kind"), **data}
    if isinstance(manifest, Pipeline):
        steps = data["spec"]["steps"]
        order = dag.topological_order({n: s.depends_on for n, s in manifest.spec.steps.items()})
        data["spec"]["steps"] = {name: steps[name] for name in order}
    for path in _OPAQUE_PATHS[manifest.kind]:
        _apply_at(data, path)
    return data


class _Dumper(yaml.SafeDumper):
    """Block style, no aliases: a reviewer reads what is there."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str_representer)


def to_yaml(data: Any) -> str:
    return yaml.dump(
        data,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=100,
    )


def export_yaml(manifest: Manifest) -> str:
    """The canonical YAML text of a manifest."""
    return to_yaml(canonical_dict(manifest))


def digest(manifest: Manifest) -> str:
    """SHA-256 (hex) of the canonical YAML."""
    return hashlib.sha256(export_yaml(manifest).encode("utf-8")).hexdigest()
