"""The Webhook manifest: an inbound URL that starts its pipeline from a JSON payload.

``paramsFromPayload`` maps parameter names to JSONPath-lite paths (``$.a.b.0``): a leading
``$.``, dotted keys, numeric segments for list elements. No filters, wildcards or slices: a
mapping a reviewer cannot evaluate in their head is one nobody can audit.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, JsonValue, model_validator
from pydantic_core import PydanticCustomError

from dirigent.engine.shapes.manifests.base import Model, ObjectMeta, SecretKeyRef
from dirigent.sdk.names import EntityName
from dirigent.sdk.units import Duration

PAYLOAD_PATH = re.compile(r"^\$(\.([A-Za-z_][A-Za-z0-9_-]*|[0-9]+))+$")


def parse_payload_path(path: str) -> tuple[str | int, ...] | None:
    """``$.a.b.0`` -> ("a", "b", 0); None when the path is not JSONPath-lite."""
    if not PAYLOAD_PATH.match(path):
        return None
    return tuple(int(s) if s.isdigit() else s for s in path[2:].split("."))


_MISSING = object()


def read_payload_path(payload: JsonValue, path: tuple[str | int, ...]) -> JsonValue | object:
    """The value at ``path``, or a sentinel when the payload has nothing there."""
    node: object = payload
    for seg in path:
        if isinstance(seg, int) and isinstance(node, list) and 0 <= seg < len(node):
            node = node[seg]
        elif isinstance(node, dict) and str(seg) in node:
            node = node[str(seg)]
        else:
            return _MISSING
    return node


def is_missing(value: object) -> bool:
    return value is _MISSING


class RateLimit(Model):
    """A per-token bucket, per API process."""

    per_minute: Annotated[int, Field(ge=1, le=100_000)] = 60
    burst: Annotated[int, Field(ge=1, le=100_000)] | None = None


def _check_payload_path(path: str) -> str:
    if parse_payload_path(path) is None:
        raise PydanticCustomError(
            "webhook.mapping.path_invalid",
            "'{path}' is not a payload path: write $.key.sub or $.list.0 "
            "(no filters, wildcards or slices)",
            {"path": path},
        )
    return path


# A validator on the value (not on the whole map) so a refusal is located at the parameter.
PayloadPath = Annotated[str, AfterValidator(_check_payload_path)]


class WebhookSpec(Model):
    pipeline: EntityName = Field(description="A Pipeline in the same namespace.")
    params_from_payload: dict[str, PayloadPath] = Field(
        default_factory=dict,
        description="Parameter name -> where its value is in the JSON payload, such as $.a.b.0.",
    )
    hmac_secret_ref: SecretKeyRef | None = Field(
        default=None,
        description="When set, deliveries must carry X-Dirigent-Signature (HMAC-SHA256).",
    )
    signature_tolerance: Duration | None = Field(
        default=None,
        description="With hmacSecretRef: deliveries must also carry X-Dirigent-Timestamp (Unix "
        "seconds) within this much of the server's clock, and the HMAC covers "
        "'<timestamp>.<body>', so a captured delivery cannot be replayed later.",
    )
    rate_limit: RateLimit | None = None
    enabled: bool = True

    @model_validator(mode="after")
    def _tolerance_needs_a_signature(self) -> WebhookSpec:
        if self.signature_tolerance is not None and self.hmac_secret_ref is None:
            raise PydanticCustomError(
                "webhook.tolerance.without_hmac",
                "signatureTolerance bounds signed deliveries: set hmacSecretRef too, or drop it",
            )
        return self


class Webhook(Model):
    """A Webhook resource: POST /hooks/{token} starts its pipeline."""

    api_version: Literal["dirigent.dev/v1alpha1"]
    kind: Literal["Webhook"]
    metadata: ObjectMeta
    spec: WebhookSpec
