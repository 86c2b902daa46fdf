"""Validating a set of documents together: each on its own, then against each other.

Documents in one invocation see each other: a Webhook or Schedule is checked against the
Pipeline it names when that Pipeline is in the same set (same namespace and name).
"""

from __future__ import annotations

from collections.abc import Sequence

from dirigent.engine.manifests.loading import LoadedManifest, SourceDocument, parse_documents
from dirigent.engine.manifests.pipeline import Pipeline
from dirigent.engine.manifests.schedule import Schedule
from dirigent.engine.manifests.webhook import Webhook
from dirigent.engine.problems import Problem, sort_problems
from dirigent.engine.validation.pipelines import check_pipeline
from dirigent.engine.validation.triggers import check_schedule_against, check_webhook_against

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


def validate_documents(
    docs: Sequence[SourceDocument],
) -> tuple[list[LoadedManifest], list[Problem]]:
    """Parse and check every document; the manifests that parsed and all problems, sorted."""
    loaded, problems = parse_documents(docs)
    problems += validate_loaded(loaded)
    return loaded, sort_problems(problems)
