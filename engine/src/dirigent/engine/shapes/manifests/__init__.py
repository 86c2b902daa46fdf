"""The four manifest kinds (Pipeline, Schedule, Webhook, Connection): one model per shape.

Every door — kubectl through the operator, the REST API, the CLI, dev mode — parses with
these models and nothing else.
"""

from dirigent.engine.shapes.manifests.connection import Connection, ConnectionSpec
from dirigent.engine.shapes.manifests.export import canonical_dict, digest, export_yaml
from dirigent.engine.shapes.manifests.loading import (
    KINDS,
    LoadedManifest,
    Manifest,
    SourceDocument,
    parse_manifest,
    read_paths,
    read_text,
)
from dirigent.engine.shapes.manifests.pipeline import (
    Alert,
    Pipeline,
    PipelineSpec,
    RetryPolicy,
    Step,
)
from dirigent.engine.shapes.manifests.schedule import Schedule, ScheduleSpec
from dirigent.engine.shapes.manifests.webhook import Webhook, WebhookSpec

__all__ = [
    "KINDS",
    "Alert",
    "Connection",
    "ConnectionSpec",
    "LoadedManifest",
    "Manifest",
    "Pipeline",
    "PipelineSpec",
    "RetryPolicy",
    "Schedule",
    "ScheduleSpec",
    "SourceDocument",
    "Step",
    "Webhook",
    "WebhookSpec",
    "canonical_dict",
    "digest",
    "export_yaml",
    "parse_manifest",
    "read_paths",
    "read_text",
]
