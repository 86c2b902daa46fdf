"""Catalog validation: a pipeline's steps against the blocks and connections installed.

Runs at apply (and in ``dirigent validate --catalog``): the ``spec.requires`` preflight (each
block it lists is installed, each connection and pipeline it lists exists in the namespace,
each storage scheme it lists has a backend), every step's
block exists, each step's config fits its block's published JSON Schema — values still holding
a ``${...}`` are not known yet and are left to the run — every connection a block's declared
connection fields name exists (and is of a kind the field takes, when the kinds are known), and
each block's own ``check_config`` has its say. Everything is reported at once, located.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from jsonschema import Draft202012Validator
from pydantic import ValidationError

from dirigent.engine.infrastructure.plugins import BlockEntry, Catalog
from dirigent.engine.shapes.manifests.pipeline import Pipeline, Step
from dirigent.engine.shapes.manifests.references import has_references
from dirigent.engine.shapes.problems import Problem, problem


def _holds_reference(value: Any) -> bool:
    if isinstance(value, str):
        return has_references(value)
    if isinstance(value, dict):
        return any(_holds_reference(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_reference(v) for v in value)
    return False


def _deferred(config: Any, path: list[Any]) -> bool:
    """True when a schema error sits at or inside a value that is still a reference."""
    node = config
    if _holds_reference(node) and isinstance(node, str):
        return True
    for seg in path:
        if (isinstance(node, dict) and seg in node) or (
            isinstance(node, list) and isinstance(seg, int) and seg < len(node)
        ):
            node = node[seg]
        else:
            return False
        if isinstance(node, str) and has_references(node):
            return True
    return False


def _check_partial(
    entry: BlockEntry, config: dict[str, Any], where: tuple[str, ...]
) -> list[Problem]:
    """``check_config`` on a config still holding references, for what is already known.

    The known values are checked (a jq program that does not compile is refused at apply
    even when its input is a reference); an issue located at a value that is still a
    reference is dropped, and a block whose check cannot cope with unresolved values is
    left to the run.
    """
    try:
        partial = entry.block.config_model.model_construct(**config)
        issues = entry.block.check_config(partial)
    except Exception:
        return []
    out: list[Problem] = []
    for issue in issues:
        loc = tuple(issue.location) if issue.location else ()
        if loc and _deferred(config, list(loc)):
            continue
        out.append(problem(issue.code, issue.message, *where, "config", *loc, **issue.params))
    return out


def check_against_catalog(
    pipeline: Pipeline,
    catalog: Catalog,
    *,
    connections: Collection[str] | None = None,
    enabled_unsafe: Collection[str] | None = None,
    pipelines: Collection[str] | None = None,
    storage_schemes: Collection[str] | None = None,
) -> list[Problem]:
    """Every problem against what is installed; a ``None`` surrounding is not checked."""
    out = _requires_problems(pipeline, catalog, connections)
    out += _required_elsewhere(pipeline, pipelines, storage_schemes)
    for name, step in pipeline.spec.steps.items():
        where = ("spec", "steps", name)
        entry = catalog.block(step.block)
        if entry is None:
            known = ", ".join(sorted(catalog.blocks)) or "none installed"
            out.append(
                problem(
                    "pipeline.block.unknown",
                    f"block '{step.block}' is not installed (installed: {known})",
                    *where,
                    "block",
                    block=step.block,
                )
            )
            continue
        if (
            enabled_unsafe is not None
            and entry.local_execution
            and step.block not in enabled_unsafe
        ):
            out.append(
                problem(
                    "pipeline.block.unsafe_disabled",
                    f"block '{step.block}' executes code on workers and is not enabled; "
                    "add it to DIRIGENT_ENABLED_UNSAFE_BLOCKS",
                    *where,
                    "block",
                    block=step.block,
                )
            )
        out += _check_config(entry, step, where, connections)
    return out


def _requires_problems(
    pipeline: Pipeline, catalog: Catalog, connections: Collection[str] | None
) -> list[Problem]:
    """The preflight a document declares: what it needs, named before any step uses it."""
    requires = pipeline.spec.requires
    if requires is None:
        return []
    out = [
        problem(
            "pipeline.block.unknown",
            f"block '{block}' is required but not installed",
            "spec",
            "requires",
            "blocks",
            i,
            block=block,
        )
        for i, block in enumerate(requires.blocks)
        if catalog.block(block) is None
    ]
    if connections is not None:
        out += [
            problem(
                "pipeline.connection.unknown",
                f"connection '{name}' is required but does not exist in this namespace",
                "spec",
                "requires",
                "connections",
                i,
                connection=name,
            )
            for i, name in enumerate(requires.connections)
            if name not in connections
        ]
    return out


def _required_elsewhere(
    pipeline: Pipeline,
    pipelines: Collection[str] | None,
    storage_schemes: Collection[str] | None,
) -> list[Problem]:
    """``requires.pipelines`` (active in the namespace; itself counts) and ``requires.storage``."""
    requires = pipeline.spec.requires
    if requires is None:
        return []
    out: list[Problem] = []
    if pipelines is not None:
        known = {*pipelines, pipeline.metadata.name}
        out += [
            problem(
                "pipeline.pipeline.unknown",
                f"pipeline '{name}' is required but is not an active pipeline of this namespace",
                *("spec", "requires", "pipelines", i),
                pipeline=name,
            )
            for i, name in enumerate(requires.pipelines)
            if name not in known
        ]
    if storage_schemes is not None:
        served = ", ".join(f"{s}://" for s in sorted(storage_schemes)) or "none"
        out += [
            problem(
                "pipeline.storage.unknown",
                f"storage '{scheme}' is required but no backend serves '{scheme}://' "
                f"(served: {served})",
                *("spec", "requires", "storage", i),
                scheme=scheme,
            )
            for i, scheme in enumerate(requires.storage)
            if scheme not in storage_schemes
        ]
    return out


def _check_config(
    entry: BlockEntry, step: Step, where: tuple[str, ...], connections: Collection[str] | None
) -> list[Problem]:
    """A step's config against its block: the schema, the connections it names, and (when it
    fits) the block's own model and ``check_config``."""
    out = _schema_problems(entry, step, where)
    config_ok = not out
    if connections is not None:
        out += _connection_problems(entry, step, where, connections)
    if config_ok and _holds_reference(step.config):
        out += _check_partial(entry, step.config, where)
    if config_ok and not _holds_reference(step.config):
        out += _model_problems(entry, step, where)
    return out


def _connection_problems(
    entry: BlockEntry, step: Step, where: tuple[str, ...], connections: Collection[str]
) -> list[Problem]:
    """Each connection field the block declares names a connection of the namespace, of a
    kind the field accepts (the kind is checked when ``connections`` maps names to kinds)."""
    out: list[Problem] = []
    for declared in entry.block.spec.connection_fields:
        name = step.config.get(declared.field)
        if not isinstance(name, str) or has_references(name):
            continue
        if name not in connections:
            out.append(
                problem(
                    "pipeline.connection.unknown",
                    f"connection '{name}' does not exist in this namespace",
                    *where,
                    "config",
                    declared.field,
                    connection=name,
                )
            )
            continue
        kind = connections.get(name) if isinstance(connections, Mapping) else None
        if declared.kinds and kind is not None and kind not in declared.kinds:
            out.append(
                problem(
                    "pipeline.connection.kind",
                    f"connection '{name}' is of kind '{kind}'; '{declared.field}' takes "
                    f"{' or '.join(declared.kinds)}",
                    *where,
                    "config",
                    declared.field,
                    connection=name,
                    kind=kind,
                )
            )
    return out


def _schema_problems(entry: BlockEntry, step: Step, where: tuple[str, ...]) -> list[Problem]:
    """The config against the block's JSON schema, but for values a reference fills at run time."""
    out: list[Problem] = []
    for err in Draft202012Validator(entry.config_schema).iter_errors(step.config):
        path = list(err.absolute_path)
        if _deferred(step.config, path):
            continue
        out.append(
            problem(
                "pipeline.config.invalid",
                f"config does not fit block '{step.block}': {err.message}",
                *where,
                "config",
                *path,
                block=step.block,
            )
        )
    return out


def _model_problems(entry: BlockEntry, step: Step, where: tuple[str, ...]) -> list[Problem]:
    """A config with no references, through the block's model and then its ``check_config``."""
    try:
        config = entry.block.config_model.model_validate(step.config)
    except ValidationError as err:
        return [
            problem(
                "pipeline.config.invalid",
                f"config: {e['msg']}",
                *where,
                "config",
                *[p for p in e["loc"]],
            )
            for e in err.errors(include_url=False)
        ]
    out: list[Problem] = []
    for issue in entry.block.check_config(config):
        loc = tuple(issue.location) if issue.location else ()
        out.append(problem(issue.code, issue.message, *where, "config", *loc, **issue.params))
    return out
