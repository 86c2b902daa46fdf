"""Specs: what a block declares about itself, read by the catalog, the engine and the docs.

Why a declaration rather than introspection: block ids are public API stored in pipeline
documents forever, the catalog is arranged by group, and the engine needs the block's
promises (idempotent? runs local code? how often to probe?) before it ever calls it.

``group`` defaults to the id's first segment (``storage.copy`` shelves under ``storage``);
a block sets it only where the id would mislead (``docker.run`` shelves under ``execute``).
``local_execution`` marks a block that runs code on the worker or in the cluster on the
document author's behalf; such blocks are refused unless named in the instance's unsafe-block
allowlist. ``deprecated_aliases`` are old ids the catalog still resolves to this block:
deprecation is by alias, never by rename.

``connection_fields`` names the config fields that hold a connection's name, each with the
connection kinds it accepts (none listed: any kind). Why declared: a connection holds
secrets, so the engine opens exactly the connections a step's config names in these fields
— checked at apply against the namespace's connections and their kinds, unsealed on the
worker for that step only — and a block never reaches one it did not declare. The default
is the one field every block has used so far, ``connection``, of any kind.

Default timings: an operator that returns a ``RemoteHandle`` is probed every 10s unless the
spec or the step says otherwise; a sensor is poked every 30s and gives up after 1 day.
"""

from __future__ import annotations

import re
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, model_validator

from dirigent.sdk.names import BlockId
from dirigent.sdk.units import Duration

__all__ = [
    "DEFAULT_OPERATOR_POLL",
    "DEFAULT_SENSOR_DEADLINE",
    "DEFAULT_SENSOR_POLL",
    "BlockSpec",
    "ConnectionField",
    "OperatorSpec",
    "SensorSpec",
]

DEFAULT_OPERATOR_POLL: Final = Duration.of(seconds=10)
DEFAULT_SENSOR_POLL: Final = Duration.of(seconds=30)
DEFAULT_SENSOR_DEADLINE: Final = Duration.of(days=1)

GROUP_PATTERN: Final = r"^[a-z][a-z0-9_]*$"
_GROUP_RE: Final = re.compile(GROUP_PATTERN)


class ConnectionField(BaseModel):
    """A config field (as written in documents) that names a connection of these kinds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    field: str = Field(min_length=1)
    kinds: tuple[str, ...] = Field(default=(), description="Accepted kinds; empty: any.")


class BlockSpec(BaseModel):
    """What every block declares: id, group, summary, description, unsafe gate, aliases."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: BlockId
    group: str = Field(default="", pattern=GROUP_PATTERN, max_length=63)
    summary: str = ""
    description: str = ""
    local_execution: bool = False
    deprecated_aliases: tuple[BlockId, ...] = ()
    connection_fields: tuple[ConnectionField, ...] = (ConnectionField(field="connection"),)

    @model_validator(mode="before")
    @classmethod
    def _default_group(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("group") and isinstance(data.get("id"), str):
            first = data["id"].split(".", 1)[0]
            # Leave an unusable id alone: the id validator reports it better than we could.
            if _GROUP_RE.fullmatch(first):
                return {**data, "group": first}
        return data


class OperatorSpec(BlockSpec):
    """An operator's declaration; ``idempotent`` says a repeated execute is harmless.

    ``default_poll`` is how often a returned ``RemoteHandle`` is probed.
    """

    idempotent: bool = False
    default_poll: Duration = DEFAULT_OPERATOR_POLL


class SensorSpec(BlockSpec):
    """A sensor's declaration: how often to poke and when to give up, unless a step says."""

    default_poll: Duration = DEFAULT_SENSOR_POLL
    default_deadline: Duration = DEFAULT_SENSOR_DEADLINE
