"""CustomResourceDefinitions generated from the engine's manifest models.

Why generated: the Pydantic models in ``dirigent.engine.shapes.manifests`` are the one definition of
each kind. The CRDs the apiserver enforces are derived from them here, written to ``crds/``
by ``dirigent crds``, and checked for drift in CI, so ``kubectl apply`` and every other door
cannot disagree about a field's shape.

The apiserver demands a *structural* schema, which a Pydantic JSON schema is not. The
translation (``structural``) keeps these invariants:

- no ``$ref``/``$defs``: every reference is inlined;
- every node has a ``type``, or is ``x-kubernetes-int-or-string`` (Duration, Size: the only
  ``anyOf`` left), or is ``x-kubernetes-preserve-unknown-fields`` (opaque maps such as step
  config and the params schema, and ``forEach``, which may be a list or a string);
- ``X | None`` becomes ``X`` without ``nullable``: the apiserver prunes a null of a
  non-nullable field, which is what the engine means by null (the field is absent);
- no ``default``: the engine applies defaults, and the canonical export (and the digest)
  omits them, so a server-side default could only disagree with it;
- no ``additionalProperties: false``: structural schemas may not say it. The apiserver prunes
  unknown fields instead, and the admission webhook refuses them before they are pruned, so
  a ``dependOn:`` typo is still an error and never a silently dropped edge;
- a map keyed by a pattern (the steps map) becomes ``additionalProperties`` plus a CEL rule
  on its keys, since CRDs support neither ``patternProperties`` nor ``propertyNames``.

CEL rules here are a first line only; the admission webhook runs the full engine validation
(graph, references, cron, timezone). Output is deterministic: the same models give the same
bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import BaseModel

from dirigent.engine.shapes.manifests import Connection, Pipeline, Schedule, Webhook
from dirigent.engine.shapes.manifests.base import API_GROUP
from dirigent.sdk import ENTITY_NAME_PATTERN

VERSION = "v1alpha1"
CATEGORY = "dirigent"
ENTITY_NAME_RULE = ENTITY_NAME_PATTERN

Schema = dict[str, Any]

# The JSONSchemaProps fields we emit, in the order they are written. Anything else in a
# Pydantic schema (title, default, $defs, x-dirigent-opaque, ...) is dropped: an unknown
# field in a CRD is refused by strict field validation.
_KEY_ORDER = (
    "description",
    "type",
    "x-kubernetes-int-or-string",
    "anyOf",
    "format",
    "enum",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-validations",
)
_OPAQUE_MARK = "x-dirigent-opaque"


def _resolve(node: Schema, defs: Mapping[str, Schema]) -> Schema:
    """Inline a ``$ref``; keywords beside the ``$ref`` (description, ...) win over the target's."""
    while "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _strip_null(node: Schema) -> Schema:
    """``anyOf: [X, {type: null}]`` becomes X, keeping the outer keywords (description)."""
    options = node.get("anyOf")
    if options is None:
        return node
    rest = [o for o in options if o.get("type") != "null"]
    if len(rest) == len(options):
        return node
    outer = {k: v for k, v in node.items() if k != "anyOf"}
    if len(rest) == 1:
        return {**rest[0], **{k: v for k, v in outer.items() if k != "title"}}
    return {**outer, "anyOf": rest}


def _ordered(node: Schema) -> Schema:
    return {k: node[k] for k in _KEY_ORDER if k in node}


def structural(node: Schema, defs: Mapping[str, Schema]) -> Schema:
    """One Pydantic JSON-schema node as a structural CRD schema node (see module docstring)."""
    node = _strip_null(_resolve(node, defs))
    node = _resolve(node, defs)  # the non-null branch may itself be a $ref
    if node.get(_OPAQUE_MARK):
        opaque: Schema = {"x-kubernetes-preserve-unknown-fields": True}
        if node.get("type") == "object":
            opaque["type"] = "object"
        if "description" in node:
            opaque["description"] = node["description"]
        return _ordered(opaque)
    out: Schema = {}
    for key, value in node.items():
        if key == "const":
            out["enum"] = [value]
        elif key == "anyOf":
            if not node.get("x-kubernetes-int-or-string"):
                raise ValueError(f"no structural form for anyOf {value!r}")
            out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        elif key == "properties":
            out["properties"] = {name: structural(sub, defs) for name, sub in value.items()}
        elif key == "items":
            out["items"] = structural(value, defs)
        elif key == "additionalProperties":
            if isinstance(value, dict):
                out["additionalProperties"] = structural(value, defs)
            # `false` is illegal in a structural schema; `true` is the default.
        elif key == "patternProperties":
            ((pattern, sub),) = value.items()
            out["additionalProperties"] = structural(sub, defs)
            max_len = node.get("propertyNames", {}).get("maxLength")
            check = f"k.matches('{pattern}')"
            if max_len is not None:
                check = f"size(k) <= {max_len} && {check}"
            out.setdefault("x-kubernetes-validations", []).append(
                {
                    "rule": f"self.all(k, {check})",
                    "message": f"keys must match {pattern}"
                    + (f" and be at most {max_len} characters" if max_len else ""),
                }
            )
        elif key in _KEY_ORDER:
            out[key] = value
    if "type" not in out and not out.get("x-kubernetes-int-or-string"):
        raise ValueError(f"schema node without a type: {node!r}")
    return _ordered(out)


# --- status -----------------------------------------------------------------------------

_TIME: Schema = {"type": "string", "format": "date-time"}


def _obj(description: str, **properties: Schema) -> Schema:
    return {"description": description, "type": "object", "properties": properties}


def _s(description: str, **extra: Any) -> Schema:
    return {"description": description, "type": "string", **extra}


_CONDITIONS: Schema = {
    "description": "Standard Kubernetes conditions; Ready says whether the engine holds the spec.",
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "type": _s("Ready, or another condition type."),
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "reason": _s("A CamelCase reason."),
            "message": _s("What a person should know."),
            "lastTransitionTime": _TIME,
            "observedGeneration": {"type": "integer", "format": "int64"},
        },
        "required": ["type", "status"],
    },
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["type"],
}

_LAST_RUN = _obj(
    "The most recent run, fed back from the engine.",
    id=_s("The run id."),
    state=_s("The run's state, such as Succeeded or Failed."),
    started=_TIME,
    finished=_TIME,
    failedStep=_s("The first step that failed, if any."),
)

_LAST_FIRING = _obj(
    "The schedule's newest firing, failed ones included (the engine's firing history).",
    time=_TIME,
    scheduledFor=_TIME,
    result=_s("Fired (a run was created) or Failed (refused, see message)."),
    runId=_s("The run it started, if any."),
    misfire={"type": "boolean"},
    message=_s("Why the firing failed."),
)

_LAST_DELIVERY = _obj(
    "The webhook's newest delivery, refusals included.",
    time=_TIME,
    outcome=_s("Accepted or Refused."),
    statusCode={"type": "integer", "format": "int64"},
    runId=_s("The run it started, if any."),
    reason=_s("The refusal's problem code."),
    message=_s("What the refusal said."),
)

_PROBLEMS: Schema = {
    "description": "What the engine's validation refused, one entry per problem.",
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "code": _s("A stable dotted code, such as pipeline.dag.cycle."),
            "location": _s("Where, such as spec.steps.load.dependsOn[0]."),
            "message": _s("What is wrong and how to fix it."),
        },
    },
}


def _status(**fields: Schema) -> Schema:
    # Unknown status fields are kept so the operator can grow status without a CRD change.
    return {
        "description": "Written by the operator.",
        "type": "object",
        "properties": {
            "observedGeneration": {"type": "integer", "format": "int64"},
            "conditions": _CONDITIONS,
            **fields,
        },
        "x-kubernetes-preserve-unknown-fields": True,
    }


# --- the four kinds ---------------------------------------------------------------------


def _column(name: str, path: str, kind: str = "string", priority: int = 0) -> dict[str, Any]:
    col: dict[str, Any] = {"name": name, "type": kind, "jsonPath": path}
    if priority:
        col["priority"] = priority
    return col


_AGE = _column("Age", ".metadata.creationTimestamp", "date")


@dataclass(frozen=True)
class KindSpec:
    """Everything about one kind that the models do not say."""

    model: type[BaseModel]
    plural: str
    short_names: tuple[str, ...]
    status: Schema
    columns: tuple[dict[str, Any], ...]
    spec_rules: tuple[dict[str, str], ...] = field(default=())


KIND_SPECS: tuple[KindSpec, ...] = (
    KindSpec(
        model=Pipeline,
        plural="pipelines",
        short_names=("dpl",),
        status=_status(
            engineVersion={
                "description": "The engine's version of this pipeline.",
                "type": "integer",
                "format": "int64",
            },
            digest=_s("SHA-256 of the canonical document."),
            problems=_PROBLEMS,
            runsInFlight={"type": "integer", "format": "int64"},
            lastRun=_LAST_RUN,
        ),
        columns=(
            _column("Version", ".status.engineVersion", "integer"),
            _column("Ready", '.status.conditions[?(@.type=="Ready")].status'),
            _column("Last Run", ".status.lastRun.state"),
            _column("Last Run Age", ".status.lastRun.started", "date"),
            _AGE,
        ),
    ),
    KindSpec(
        model=Schedule,
        plural="schedules",
        short_names=("dsch",),
        status=_status(nextFire=_TIME, lastFired=_TIME, lastRun=_LAST_RUN, lastFiring=_LAST_FIRING),
        columns=(
            _column("Pipeline", ".spec.pipeline"),
            _column("Cron", ".spec.cron"),
            _column("Interval", ".spec.interval"),
            _column("At", ".spec.at", priority=1),
            _column("Timezone", ".spec.timezone", priority=1),
            _column("Paused", ".spec.paused", "boolean"),
            _column("Next Fire", ".status.nextFire", "date"),
            _AGE,
        ),
        spec_rules=(
            {
                "rule": "(has(self.cron) ? 1 : 0) + (has(self.interval) ? 1 : 0)"
                " + (has(self.at) ? 1 : 0) == 1",
                "message": "a schedule needs exactly one of cron, interval or at",
            },
        ),
    ),
    KindSpec(
        model=Webhook,
        plural="webhooks",
        short_names=("dwh",),
        status=_status(
            tokenSecret=_s("The Secret holding the webhook's token."),
            path=_s("The URL path deliveries are posted to."),
            lastDelivery=_LAST_DELIVERY,
        ),
        columns=(
            _column("Pipeline", ".spec.pipeline"),
            _column("Enabled", ".spec.enabled", "boolean"),
            _column("Last Delivery", ".status.lastDelivery.outcome"),
            _column("Delivered", ".status.lastDelivery.time", "date"),
            _column("Token Secret", ".status.tokenSecret", priority=1),
            _AGE,
        ),
    ),
    KindSpec(
        model=Connection,
        plural="connections",
        short_names=("dconn",),
        status=_status(
            lastCheck=_obj(
                "The last health check.",
                time=_TIME,
                healthy={"type": "boolean"},
                message=_s("What the check said."),
            ),
        ),
        columns=(
            _column("Type", ".spec.type"),
            _column("Healthy", ".status.lastCheck.healthy", "boolean"),
            _AGE,
        ),
    ),
)


def openapi_schema(kind: KindSpec) -> Schema:
    """The structural ``openAPIV3Schema`` of one kind."""
    source = kind.model.model_json_schema(by_alias=True, mode="validation")
    defs: dict[str, Schema] = source.get("$defs", {})
    spec = structural(source["properties"]["spec"], defs)
    for path, extra in _LIST_TYPES.get(kind.model.__name__, ()):
        _annotate(spec, path, extra)
    if kind.spec_rules:
        spec["x-kubernetes-validations"] = [
            *spec.get("x-kubernetes-validations", []),
            *kind.spec_rules,
        ]
        spec = _ordered(spec)
    return {
        "description": source.get("description", ""),
        "type": "object",
        "properties": {
            # Set by the apiserver; an enum here would break a future version conversion.
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            # Kubernetes owns metadata's schema; the name grammar is the CEL rule below.
            "metadata": {"type": "object"},
            "spec": spec,
            "status": kind.status,
        },
        "required": ["spec"],
        "x-kubernetes-validations": [
            {
                "rule": f"self.metadata.name.matches('{ENTITY_NAME_RULE}')"
                " && size(self.metadata.name) <= 63",
                "message": "metadata.name must be a DNS label: lowercase letters, digits and "
                "'-', starting with a letter, ending with a letter or digit, at most 63 "
                "characters",
            }
        ],
    }


def crd(kind: KindSpec) -> dict[str, Any]:
    """One CustomResourceDefinition object."""
    name = kind.model.__name__
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{kind.plural}.{API_GROUP}"},
        "spec": {
            "group": API_GROUP,
            "names": {
                "kind": name,
                "listKind": f"{name}List",
                "plural": kind.plural,
                "singular": name.lower(),
                "shortNames": list(kind.short_names),
                "categories": [CATEGORY],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": list(kind.columns),
                    "schema": {"openAPIV3Schema": openapi_schema(kind)},
                }
            ],
        },
    }


def _annotate(schema: Schema, path: tuple[str, ...], extra: Schema) -> None:
    """Add keywords to the node at ``path`` (a walk through schema keywords)."""
    node = schema
    for key in path:
        node = node[key]
    merged = _ordered({**node, **extra})
    node.clear()
    node.update(merged)


_SET: Schema = {"x-kubernetes-list-type": "set"}

# Lists whose entries the engine already refuses to repeat: the apiserver says so too, and
# server-side apply merges them by entry instead of replacing them whole.
_LIST_TYPES: dict[str, tuple[tuple[tuple[str, ...], Schema], ...]] = {
    "Pipeline": (
        (("properties", "tags"), _SET),
        (("properties", "steps", "additionalProperties", "properties", "dependsOn"), _SET),
        (
            ("properties", "alerts"),
            {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
        ),
    ),
}


class _Dumper(yaml.SafeDumper):
    """Block style, no aliases, multi-line strings as literal blocks."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar(
        "tag:yaml.org,2002:str", value, style="|" if "\n" in value else None
    )


_Dumper.add_representer(str, _str)


def to_yaml(data: Any) -> str:
    # A wide line: CEL rules and patterns read better unfolded, and the output stays stable.
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=1_000, allow_unicode=True)


HEADER = "# Generated by `dirigent crds` from dirigent.engine.shapes.manifests; do not edit.\n"


def file_name(kind: KindSpec) -> str:
    return f"{API_GROUP}_{kind.plural}.yaml"


def render_all() -> dict[str, str]:
    """File name -> YAML text, for every kind: exactly what ``crds/`` must hold."""
    return {file_name(k): HEADER + to_yaml(crd(k)) for k in KIND_SPECS}
