"""The plugin host: discovery once at start, a catalog, direct calls afterwards.

Plugins contribute through the ``dirigent.plugins.v1`` entry-point group. Discovery runs
once, when a process starts; after that the engine looks blocks up in a dict and calls their
methods directly, so a block call costs what a method call costs. The catalog also carries
each block's published JSON Schemas, which apply-time validation and the block reference
read.

Storage backends are catalogued by URI scheme: ``file`` is the host's own, every other
scheme comes from exactly one plugin (two plugins contributing one scheme is refused at
start, naming both), and ``storage_schemes`` is what ``requires.storage`` is checked against.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Literal

import structlog

from dirigent.sdk import (
    ENTRY_POINT_GROUP,
    ConnectionKind,
    Contribution,
    Notifier,
    Operator,
    Sensor,
    StorageBackend,
)

log = structlog.get_logger(__name__)

HOST_SCHEMES: frozenset[str] = frozenset({"file"})
"""Schemes the engine serves itself (``infrastructure.storage``); no plugin contributes them."""


@dataclass(frozen=True)
class BlockEntry:
    """One block in the catalog."""

    id: str
    kind: Literal["operator", "sensor"]
    block: Operator[Any, Any] | Sensor[Any, Any]
    plugin: str
    config_schema: dict[str, Any]
    output_schema: dict[str, Any]

    @property
    def local_execution(self) -> bool:
        return bool(self.block.spec.local_execution)


@dataclass(frozen=True)
class SchemeEntry:
    """One storage scheme in the catalog: its backend and the plugin that contributed it."""

    scheme: str
    backend: StorageBackend[Any]
    plugin: str

    @property
    def summary(self) -> str:
        return type(self.backend).summary

    @property
    def connection_kind(self) -> str | None:
        return type(self.backend).connection_kind


@dataclass(frozen=True)
class Catalog:
    """Everything the installed plugins contribute, indexed by id (schemes by scheme)."""

    blocks: Mapping[str, BlockEntry] = field(default_factory=dict)
    connection_kinds: Mapping[str, ConnectionKind[Any]] = field(default_factory=dict)
    notifiers: Mapping[str, Notifier[Any]] = field(default_factory=dict)
    plugins: tuple[str, ...] = ()
    storage_backends: Mapping[str, SchemeEntry] = field(default_factory=dict)

    def block(self, block_id: str) -> BlockEntry | None:
        return self.blocks.get(block_id)

    @property
    def storage_schemes(self) -> frozenset[str]:
        """Every scheme a worker with this catalog serves: the host's and the plugins'."""
        return HOST_SCHEMES | frozenset(self.storage_backends)


def _schema(model: Any) -> dict[str, Any]:
    schema: dict[str, Any] = model.model_json_schema(mode="validation")
    return schema


def build_catalog(contributions: Iterable[tuple[str, Contribution]]) -> Catalog:
    """A catalog from named contributions; a duplicate id across plugins is an error."""
    blocks: dict[str, BlockEntry] = {}
    kinds: dict[str, ConnectionKind[Any]] = {}
    notifiers: dict[str, Notifier[Any]] = {}
    schemes: dict[str, SchemeEntry] = {}
    names: list[str] = []
    for plugin, contribution in contributions:
        names.append(plugin)
        _add_schemes(schemes, plugin, contribution)
        members: list[tuple[Literal["operator", "sensor"], Operator[Any, Any] | Sensor[Any, Any]]]
        members = [("operator", b) for b in contribution.operators]
        members += [("sensor", b) for b in contribution.sensors]
        for kind, block in members:
            spec = block.spec
            entry = BlockEntry(
                spec.id,
                kind,
                block,
                plugin,
                _schema(block.config_model),
                _schema(block.output_model),
            )
            for block_id in (spec.id, *spec.deprecated_aliases):
                if block_id in blocks:
                    raise ValueError(
                        f"block {block_id!r} is contributed by both {blocks[block_id].plugin!r} and {plugin!r}"
                    )
                blocks[block_id] = entry
        for ck in contribution.connection_kinds:
            kinds[type(ck).id] = ck
        for n in contribution.notifiers:
            notifiers[type(n).id] = n
    return Catalog(blocks, kinds, notifiers, tuple(names), schemes)


def _add_schemes(schemes: dict[str, SchemeEntry], plugin: str, contribution: Contribution) -> None:
    """A plugin's storage backends; a scheme another plugin (or the host) serves is refused."""
    for backend in contribution.storage_backends:
        scheme = type(backend).scheme
        if scheme in HOST_SCHEMES:  # Contribution refuses it too; a hand-built one may not
            raise ValueError(f"storage scheme {scheme!r} of {plugin!r} is the engine's own")
        if scheme in schemes:
            raise ValueError(
                f"storage scheme {scheme!r} is contributed by both "
                f"{schemes[scheme].plugin!r} and {plugin!r}"
            )
        schemes[scheme] = SchemeEntry(scheme, backend, plugin)


def discover(group: str = ENTRY_POINT_GROUP) -> Catalog:
    """Load every installed plugin once. A broken plugin is logged and skipped, never fatal."""
    found: list[tuple[str, Contribution]] = []
    for ep in sorted(entry_points(group=group), key=lambda e: e.name):
        try:
            plugin = ep.load()
            found.append((ep.name, plugin.contribute()))
        except Exception as err:  # a third party's bug must not stop the host
            log.error("plugin.load_failed", plugin=ep.name, error=str(err))
    return build_catalog(found)
