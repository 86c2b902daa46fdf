"""The block reference (``docs/blocks.md``), rendered from the catalog.

Why generated: the catalog is what an instance actually has, so a reference written from it
cannot drift from the code. Every block's summary, config and output fields (type, default,
description, from the published JSON Schema), its catalogued error codes (the ``Message``
constants of the modules of a group's blocks) and an example step; then the connection kinds and notifiers.
Only the named plugin's contribution is rendered, so a test plugin installed beside it
never leaks into the document.
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import entry_points
from typing import Any

import yaml

from dirigent.engine import BlockEntry, Catalog, build_catalog
from dirigent.sdk import ENTRY_POINT_GROUP, Message, secret_fields

HEADER = """# Block reference

Generated from the catalog by `dirigent blocks docs`; do not edit by hand (CI checks it
with `dirigent blocks docs --check`). Config fields are written as in documents
(camelCase); outputs as `${{steps.<name>.output.<field>}}` reads them. Durations accept
`30s`, `5m`, `1h30m` or seconds; sizes `64kb`, `1mb` or bytes.

Blocks marked **unsafe** run code on the worker's behalf and are refused unless named in
`DIRIGENT_ENABLED_UNSAFE_BLOCKS`.

"""


def builtin_catalog(plugin: str = "builtin") -> Catalog:
    """The catalog of one installed plugin (by entry-point name)."""
    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == plugin]
    return build_catalog([(ep.name, ep.load().contribute()) for ep in found])


def _type(schema: dict[str, Any], defs: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return _type(defs.get(name, {}), defs) if name in defs else name
    if schema.get("x-kubernetes-int-or-string"):
        return "duration" if "ms" in schema.get("pattern", "") else "size"
    if "anyOf" in schema:
        parts = [_type(s, defs) for s in schema["anyOf"] if s.get("type") != "null"]
        nullable = any(s.get("type") == "null" for s in schema["anyOf"])
        return " \\| ".join(dict.fromkeys(parts)) + (" (optional)" if nullable else "")
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{schema['const']}`"
    kind = schema.get("type")
    if kind == "array":
        return f"list of {_type(schema.get('items', {}), defs)}"
    if kind == "object":
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            return f"map of {_type(extra, defs)}"
        return "object"
    if kind == "string" and schema.get("format"):
        return f"string ({schema['format']})"
    return str(kind or "any JSON")


def _fields(schema: dict[str, Any]) -> list[str]:
    props = schema.get("properties", {})
    if not props:
        return ["_none_", ""]
    defs = schema.get("$defs", {})
    required = set(schema.get("required", []))
    rows = ["| field | type | default | description |", "|---|---|---|---|"]
    for name, prop in props.items():
        if name in required:
            default = "required"
        elif "default" in prop:
            default = f"`{json.dumps(prop['default'])}`"
        else:
            default = "empty"
        desc = (prop.get("description") or "").replace("|", "\\|").replace("\n", " ")
        rows.append(f"| `{name}` | {_type(prop, defs)} | {default} | {desc} |")
    return [*rows, ""]


def _sample(schema: dict[str, Any], name: str) -> Any:
    kind = schema.get("type")
    if "anyOf" in schema:
        first = next(s for s in schema["anyOf"] if s.get("type") != "null")
        return _sample(first, name)
    return {"integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}.get(
        str(kind), f"<{name}>"
    )


def _example(entry: BlockEntry) -> str:
    schema = entry.config_schema
    config = {n: _sample(schema["properties"][n], n) for n in schema.get("required", [])}
    step = {"block": entry.id, "config": config} if config else {"block": entry.id}
    text = yaml.safe_dump({"steps": {entry.id.replace(".", "_"): step}}, sort_keys=False)
    return "```yaml\n" + text + "```\n"


def _codes(obj: object) -> list[Message]:
    module = sys.modules[type(obj).__module__]
    found = {v.code: v for v in vars(module).values() if isinstance(v, Message)}
    return [found[c] for c in sorted(found)]


def _block(entry: BlockEntry) -> list[str]:
    spec = entry.block.spec
    flags = [entry.kind, f"group `{spec.group}`"] + (["**unsafe**"] if spec.local_execution else [])
    lines = [f"### `{entry.id}`", "", f"{spec.summary} ({', '.join(flags)})", ""]
    if spec.description:
        lines += [spec.description, ""]
    lines += ["**Config**", "", *_fields(entry.config_schema)]
    lines += ["**Output**", "", *_fields(entry.output_schema)]
    lines += ["**Example**", "", _example(entry)]
    return lines


def render(catalog: Catalog) -> str:
    """The whole reference as markdown."""
    lines = [HEADER.format()]
    groups: dict[str, list[BlockEntry]] = {}
    for block_id in sorted(catalog.blocks):
        entry = catalog.blocks[block_id]
        if entry.id == block_id:
            groups.setdefault(entry.block.spec.group, []).append(entry)
    for group in sorted(groups):
        lines += [f"## {group}", ""]
        codes = {m.code: m for e in groups[group] for m in _codes(e.block)}
        if codes:
            lines += ["Error codes of this group:", ""]
            lines += [f"- `{c}`: {codes[c].template}" for c in sorted(codes)] + [""]
        for entry in groups[group]:
            lines += _block(entry)
    lines += ["## Connection kinds", ""]
    for kind_id, kind in sorted(catalog.connection_kinds.items()):
        secrets = ", ".join(f"`{s}`" for s in secret_fields(kind.config_model)) or "none"
        schema = kind.config_model.model_json_schema(mode="validation")
        lines += [f"### `{kind_id}`", "", kind.summary, "", f"Secret fields: {secrets}.", ""]
        lines += _fields(schema)
    lines += ["## Notifiers", ""]
    for notifier_id, notifier in sorted(catalog.notifiers.items()):
        lines += [f"### `{notifier_id}`", "", notifier.summary, ""]
        if notifier_id in catalog.connection_kinds:
            lines += [f"Config: the settings of a `{notifier_id}` connection.", ""]
        else:
            schema = notifier.config_model.model_json_schema(mode="validation")
            lines += ["**Config**", "", *_fields(schema)]
        own = [m for m in _codes(notifier) if m.code.startswith(f"notify.{notifier_id}.")]
        lines += [f"- `{m.code}`: {m.template}" for m in own] + [""]
    return "\n".join(lines).rstrip() + "\n"
