"""The Connection manifest: a credential record of a plugin-provided connection kind.

Secret values never appear in a manifest: ``secrets`` names keys of Kubernetes Secrets, which
the operator reads and stores encrypted in the database, so workers never need Secret access.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from dirigent.engine.shapes.manifests.base import Model, ObjectMeta, OpaqueMap, SecretKeyRef

CONNECTION_TYPE_PATTERN = r"^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*$"


class ConnectionSpec(Model):
    type: Annotated[
        str,
        Field(pattern=CONNECTION_TYPE_PATTERN, description="The connection kind, such as http."),
    ]
    settings: OpaqueMap = Field(default_factory=dict)
    secrets: dict[str, SecretKeyRef] = Field(
        default_factory=dict,
        description="Secret field name -> a key of a Secret in this namespace.",
    )


class Connection(Model):
    """A Connection resource."""

    api_version: Literal["dirigent.dev/v1alpha1"]
    kind: Literal["Connection"]
    metadata: ObjectMeta
    spec: ConnectionSpec
