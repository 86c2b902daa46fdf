"""What every dirigent manifest shares: the Kubernetes envelope and our model conventions.

A manifest is a Kubernetes object (``apiVersion``/``kind``/``metadata``/``spec``), and the
same file works through every door: ``kubectl apply``, ``dirigent dev``, ``dirigent run
--local`` and the REST apply endpoint. Python fields are snake_case; the wire is camelCase
(Kubernetes API conventions), through one alias generator. Unknown keys are refused at every
level, because a ``dependOn:`` typo would otherwise delete an edge silently.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue
from pydantic.alias_generators import to_camel

from dirigent.sdk.names import EntityName

API_GROUP = "dirigent.dev"
API_VERSION = f"{API_GROUP}/v1alpha1"

# Marks a field whose content is opaque to the format (step config, a JSON Schema, connection
# settings). CRD generation turns it into x-kubernetes-preserve-unknown-fields; the canonical
# export sorts its keys so the digest does not depend on how a person ordered them.
OPAQUE: dict[str, Any] = {"x-kubernetes-preserve-unknown-fields": True, "x-dirigent-opaque": True}

OpaqueMap = Annotated[dict[str, JsonValue], Field(json_schema_extra=OPAQUE)]


class Model(BaseModel):
    """Base of every manifest model: camelCase on the wire, no unknown keys, no coercion surprises."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        validate_default=False,
        use_enum_values=False,
    )


class ObjectMeta(Model):
    """The part of Kubernetes metadata a manifest may carry.

    Only what a person writes is accepted: the server-populated fields (uid,
    resourceVersion, managedFields, ...) are stripped by the operator before validation.
    """

    name: EntityName = Field(description="The resource name: a DNS label, unique in its namespace.")
    namespace: EntityName | None = Field(
        default=None, description="Defaults to the door's namespace."
    )
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class SecretKeyRef(Model):
    """A key in a Kubernetes Secret in the resource's own namespace."""

    name: Annotated[str, Field(min_length=1, max_length=253, description="The Secret's name.")]
    key: Annotated[
        str, Field(min_length=1, max_length=253, description="The key within the Secret.")
    ]
