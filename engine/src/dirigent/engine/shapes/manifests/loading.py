"""From bytes to typed manifests: YAML reading, kind dispatch, and located problems.

Every door (a folder for ``dirigent validate`` and ``dirigent dev``, one body for the REST
apply, an object from the Kubernetes API for the operator) ends in ``parse_manifest``, so a
manifest is refused the same way, with the same codes, wherever it enters.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import JsonValue, ValidationError

from dirigent.engine.shapes.manifests.base import API_VERSION
from dirigent.engine.shapes.manifests.connection import Connection
from dirigent.engine.shapes.manifests.pipeline import Pipeline
from dirigent.engine.shapes.manifests.schedule import Schedule
from dirigent.engine.shapes.manifests.webhook import Webhook
from dirigent.engine.shapes.problems import Problem, location, problem
from dirigent.engine.shapes.storable import unstorable_path

Manifest = Pipeline | Schedule | Webhook | Connection
KINDS: dict[str, type[Manifest]] = {
    "Pipeline": Pipeline,
    "Schedule": Schedule,
    "Webhook": Webhook,
    "Connection": Connection,
}
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class SourceDocument:
    """One YAML document and where it came from."""

    file: str | None
    index: int | None
    data: JsonValue


@dataclass(frozen=True)
class LoadedManifest:
    """A manifest that parsed, with its source."""

    source: SourceDocument
    manifest: Manifest


def _yaml_problem(file: str, err: yaml.YAMLError) -> Problem:
    mark = getattr(err, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    detail = getattr(err, "problem", None) or str(err)
    return Problem(
        code="manifest.yaml.invalid",
        message=f"the file is not valid YAML: {detail}" + (f" at {where}" if where else ""),
        file=file,
    )


class _Loader(yaml.SafeLoader):
    """Safe YAML read the way kubectl reads it: an unquoted timestamp stays a string.

    kubectl turns YAML into JSON before anything sees it, so ``day: 2025-01-01`` arrives as
    the string "2025-01-01". PyYAML would make it a ``date``, which is not a JSON value, and
    an opaque map (params, config) holding one would be refused here but accepted by kubectl.
    """


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def read_text(text: str, file: str | None = None) -> tuple[list[SourceDocument], list[Problem]]:
    """Split multi-document YAML (JSON is YAML) into documents; empty documents are skipped."""
    try:
        docs = list(yaml.load_all(text, Loader=_Loader))  # _Loader is a SafeLoader
    except yaml.YAMLError as err:
        return [], [_yaml_problem(file or "<input>", err)]
    out = [SourceDocument(file, i, d) for i, d in enumerate(docs) if d is not None]
    return out, []


def manifest_files(paths: Iterable[str | Path]) -> tuple[list[Path], list[Problem]]:
    """Files named directly, and every manifest file under a folder, in a stable order."""
    files: list[Path] = []
    problems: list[Problem] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(
                sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in MANIFEST_SUFFIXES)
            )
        elif path.is_file():
            files.append(path)
        else:
            problems.append(
                Problem(
                    code="manifest.file.missing", message="no such file or folder", file=str(path)
                )
            )
    return files, problems


def read_paths(paths: Iterable[str | Path]) -> tuple[list[SourceDocument], list[Problem]]:
    files, problems = manifest_files(paths)
    docs: list[SourceDocument] = []
    for path in files:
        found, trouble = read_text(path.read_text(encoding="utf-8"), str(path))
        docs.extend(found)
        problems.extend(trouble)
    return docs, problems


# Error types raised by the sdk's value types, as our stable codes.
_SDK_CODES = {
    "entity_name": "manifest.name.invalid",
    "step_name": "manifest.step_name.invalid",
    "duration": "manifest.duration.invalid",
    "size": "manifest.size.invalid",
}


def _error_problem(err: Any) -> Problem:
    """One pydantic error as a located problem with a stable code."""
    # "[key]" is pydantic's marker for an error in a map key: the key itself is the location.
    where = location(*[p for p in err["loc"] if isinstance(p, str | int) and p != "[key]"])
    kind: str = err["type"]
    ctx = err.get("ctx") or {}
    if "." in kind:  # our own PydanticCustomError codes are dotted and already worded
        return Problem(
            code=kind,
            message=err["msg"],
            location=where,
            params={k: v for k, v in ctx.items() if isinstance(v, str | int | float | bool)},
        )
    last = err["loc"][-1] if err["loc"] else ""
    if kind in _SDK_CODES:
        return problem(_SDK_CODES[kind], str(err["msg"]), where)
    if kind == "extra_forbidden":
        return problem(
            "manifest.field.unknown",
            f"'{last}' is not a field here; remove it or check its spelling",
            where,
        )
    if kind == "missing":
        return problem("manifest.field.required", f"'{last}' is required here", where)
    if kind == "enum" or kind == "literal_error":
        return problem("manifest.value.enum", f"{err['msg']}", where)
    if kind == "string_pattern_mismatch":
        pattern = ctx.get("pattern", "")
        return problem(
            "manifest.value.pattern",
            f"{err.get('input')!r} does not match the required form {pattern}",
            where,
        )
    message = str(err["msg"]).removeprefix("Value error, ")
    return problem("manifest.value.invalid", message, where)


def validation_problems(error: ValidationError) -> list[Problem]:
    return [_error_problem(e) for e in error.errors(include_url=False)]


def parse_manifest(data: JsonValue) -> tuple[Manifest | None, list[Problem]]:
    """A typed manifest, or every structural problem with it."""
    if not isinstance(data, dict):
        return None, [
            problem(
                "manifest.not_an_object",
                "a manifest is a mapping with apiVersion, kind, metadata and spec",
            )
        ]
    api_version = data.get("apiVersion")
    kind = data.get("kind")
    trouble: list[Problem] = []
    if api_version != API_VERSION:
        trouble.append(
            problem(
                "manifest.api_version.unknown",
                f"apiVersion must be {API_VERSION}, got {api_version!r}",
                "apiVersion",
            )
        )
    if not isinstance(kind, str) or kind not in KINDS:
        trouble.append(
            problem(
                "manifest.kind.unknown",
                f"kind must be one of {', '.join(KINDS)}, got {kind!r}",
                "kind",
            )
        )
    bad = unstorable_path(data)
    if bad is not None:
        trouble.append(
            problem(
                "manifest.value.unstorable",
                "this value holds a NUL character (or a lone surrogate), which cannot be "
                "stored; remove it",
                *bad,
            )
        )
    if trouble:
        return None, trouble
    assert isinstance(kind, str)
    try:
        return KINDS[kind].model_validate(data), []
    except ValidationError as err:
        return None, validation_problems(err)


def parse_documents(
    docs: Sequence[SourceDocument],
) -> tuple[list[LoadedManifest], list[Problem]]:
    loaded: list[LoadedManifest] = []
    problems: list[Problem] = []
    for doc in docs:
        manifest, trouble = parse_manifest(doc.data)
        problems.extend(p.at(file=doc.file, document=doc.index) for p in trouble)
        if manifest is not None:
            loaded.append(LoadedManifest(doc, manifest))
    return loaded, problems
