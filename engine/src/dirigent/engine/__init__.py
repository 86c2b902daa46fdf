"""dirigent's engine: manifests, validation, the store, the runtime, and the door to them all.

Processes (the API, the operator, the CLI) use the names below and the shapes in
``dirigent.engine.shapes`` (manifests, views, problems), and nothing else of the engine: an
import-linter contract forbids them the door's internals, the runtime, the store, the rules
and the infrastructure. The folders are the engine's layers, each importing only those below:

    door            Engine and its facets (runs, pipelines, triggers, ...)
    runtime         the worker loop, executing a block, the sweeper, the scheduler
    store           SQL only: schema, transactions that move state, read queries
    rules           pure decisions: validation, progression, resolving, templates, firing
    infrastructure  settings, logging, metrics, plugin host, artifact storage, sealing
    shapes          manifests, views, problems, statuses: the values every door exchanges

The names below are loaded on first use (PEP 562): importing a light module of the engine
(``dirigent.engine.shapes.problems``) must not pull in the store and SQLAlchemy, so a client
command such as ``dirigent runs list`` starts in a fraction of the time.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dirigent.engine.door.applying import Applied
    from dirigent.engine.door.engine import Engine
    from dirigent.engine.door.local import LocalInstance, local_instance
    from dirigent.engine.door.manifests import Deleted
    from dirigent.engine.door.migrating import MigrationFailed, MigrationResult
    from dirigent.engine.door.system import storage_schemes
    from dirigent.engine.infrastructure.embedded import EmbeddedPostgres, EmbeddedPostgresError
    from dirigent.engine.infrastructure.logconfig import configure_logging
    from dirigent.engine.infrastructure.plugins import (
        BlockEntry,
        Catalog,
        build_catalog,
        discover,
    )
    from dirigent.engine.infrastructure.settings import EngineSettings, pooler_warning
    from dirigent.engine.rules.validation.catalog import check_against_catalog
    from dirigent.engine.rules.validation.documents import DEFAULT_NAMESPACE, validate_documents
    from dirigent.engine.rules.validation.pipelines import check_pipeline
    from dirigent.engine.rules.validation.triggers import (
        check_schedule_against,
        check_webhook_against,
    )
    from dirigent.engine.shapes.problems import EngineUnavailable, ProblemsError
    from dirigent.engine.store.queries.reads import RunFilter
    from dirigent.engine.store.transactions.retrying import ManualRetry
    from dirigent.engine.store.transactions.runs import RunCreated, RunRequest

_HOMES = {
    "Applied": "dirigent.engine.door.applying",
    "BlockEntry": "dirigent.engine.infrastructure.plugins",
    "Catalog": "dirigent.engine.infrastructure.plugins",
    "DEFAULT_NAMESPACE": "dirigent.engine.rules.validation.documents",
    "Deleted": "dirigent.engine.door.manifests",
    "EmbeddedPostgres": "dirigent.engine.infrastructure.embedded",
    "EmbeddedPostgresError": "dirigent.engine.infrastructure.embedded",
    "Engine": "dirigent.engine.door.engine",
    "EngineSettings": "dirigent.engine.infrastructure.settings",
    "EngineUnavailable": "dirigent.engine.shapes.problems",
    "LocalInstance": "dirigent.engine.door.local",
    "ManualRetry": "dirigent.engine.store.transactions.retrying",
    "MigrationFailed": "dirigent.engine.door.migrating",
    "MigrationResult": "dirigent.engine.door.migrating",
    "ProblemsError": "dirigent.engine.shapes.problems",
    "RunCreated": "dirigent.engine.store.transactions.runs",
    "RunFilter": "dirigent.engine.store.queries.reads",
    "RunRequest": "dirigent.engine.store.transactions.runs",
    "build_catalog": "dirigent.engine.infrastructure.plugins",
    "check_against_catalog": "dirigent.engine.rules.validation.catalog",
    "check_pipeline": "dirigent.engine.rules.validation.pipelines",
    "check_schedule_against": "dirigent.engine.rules.validation.triggers",
    "check_webhook_against": "dirigent.engine.rules.validation.triggers",
    "configure_logging": "dirigent.engine.infrastructure.logconfig",
    "discover": "dirigent.engine.infrastructure.plugins",
    "local_instance": "dirigent.engine.door.local",
    "pooler_warning": "dirigent.engine.infrastructure.settings",
    "storage_schemes": "dirigent.engine.door.system",
    "validate_documents": "dirigent.engine.rules.validation.documents",
}

__all__ = [
    "DEFAULT_NAMESPACE",
    "Applied",
    "BlockEntry",
    "Catalog",
    "Deleted",
    "EmbeddedPostgres",
    "EmbeddedPostgresError",
    "Engine",
    "EngineSettings",
    "EngineUnavailable",
    "LocalInstance",
    "ManualRetry",
    "MigrationFailed",
    "MigrationResult",
    "ProblemsError",
    "RunCreated",
    "RunFilter",
    "RunRequest",
    "build_catalog",
    "check_against_catalog",
    "check_pipeline",
    "check_schedule_against",
    "check_webhook_against",
    "configure_logging",
    "discover",
    "local_instance",
    "pooler_warning",
    "storage_schemes",
    "validate_documents",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
