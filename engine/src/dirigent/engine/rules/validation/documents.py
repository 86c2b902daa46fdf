"""Validating a set of documents together: each on its own, then against each other.

Documents in one invocation see each other: a Webhook or Schedule is checked against the
Pipeline it names when that Pipeline is in the same set (same namespace and name).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from dirigent.engine.rules.validation.pipelines import check_pipeline
from dirigent.engine.rules.validation.triggers import check_schedule_against, check_webhook_against
from dirigent.engine.shapes.manifests.loading import LoadedManifest, SourceDocument, parse_documents
from dirigent.engine.shapes.manifests.pipeline import Pipeline
from dirigent.engine.shapes.manifests.schedule import Schedule
from dirigent.engine.shapes.manifests.webhook import Webhook
from dirigent.engine.shapes.problems import Problem, sort_problems

DEFAULT_NAMESPACE = "default"


def _key(namespace: str | None, name: str) -> tuple[str, str]:
    return namespace or DEFAULT_NAMESPACE, name


def validate_loaded(loaded: Sequence[LoadedManifest]) -> list[Problem]:
    problems: list[Problem] = []
    pipelines: dict[tuple[str, str], Pipeline] = {}
    for item in loaded:
        m = item.manifest
        if isinstance(m, Pipeline):
            pipelines[_key(m.metadata.namespace, m.metadata.name)] = m
            found = check_pipeline(m)
            problems += [p.at(file=item.source.file, document=item.source.index) for p in found]
    for item in loaded:
        m = item.manifest
        if isinstance(m, Webhook | Schedule):
            target = pipelines.get(_key(m.metadata.namespace, m.spec.pipeline))
            if target is None:
                continue
            found = (
                check_webhook_against(m, target)
                if isinstance(m, Webhook)
                else check_schedule_against(m, target)
            )
            problems += [p.at(file=item.source.file, document=item.source.index) for p in found]
    return problems


def _delete(data: Any, loc: tuple[Any, ...]) -> bool:
    """Remove the value at a pydantic error location from raw data; False when it cannot."""
    node = data
    for part in loc[:-1]:
        if (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and part < len(node)
        ):
            node = node[part]
        else:
            return False
    last = loc[-1]
    if isinstance(node, dict) and last in node:
        del node[last]
        return True
    if isinstance(node, list) and isinstance(last, int) and last < len(node):
        del node[last]
        return True
    return False


def salvage_pipeline(data: Any) -> Pipeline | None:
    """A best-effort Pipeline from a document that failed its shape, for the whole-document checks.

    Every problem should be reported at once, so a document with an unknown field *and* a
    cycle names both. Offending optional values are removed and validation retried; a
    missing required field, or an invalid step name (removing the step would invent
    problems elsewhere), gives up.
    """
    current = copy.deepcopy(data)
    for _ in range(8):
        try:
            return Pipeline.model_validate(current)
        except ValidationError as err:
            for e in err.errors(include_url=False):
                loc = tuple(e["loc"])
                if e["type"] == "missing" or "[key]" in loc or not loc:
                    return None
                if not _delete(current, loc):
                    return None
    return None


def validate_documents(
    docs: Sequence[SourceDocument],
) -> tuple[list[LoadedManifest], list[Problem]]:
    """Parse and check every document; the manifests that parsed and all problems, sorted."""
    loaded, problems = parse_documents(docs)
    problems += validate_loaded(loaded)
    parsed = {(item.source.file, item.source.index) for item in loaded}
    for doc in docs:
        if (doc.file, doc.index) in parsed or not isinstance(doc.data, dict):
            continue
        if doc.data.get("kind") != "Pipeline":
            continue
        salvaged = salvage_pipeline(doc.data)
        if salvaged is None:
            continue
        shaped = [p.location for p in problems if (p.file, p.document) == (doc.file, doc.index)]
        for found in check_pipeline(salvaged):
            # A whole-document finding inside a field that is already refused adds nothing.
            if not any(found.location.startswith(where) for where in shaped if where):
                problems.append(found.at(file=doc.file, document=doc.index))
    return loaded, sort_problems(problems)
