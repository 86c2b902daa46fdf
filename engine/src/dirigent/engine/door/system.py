"""The system facet: the installed blocks and storage schemes, readiness, and what this
installation runs."""

from __future__ import annotations

import asyncio
import importlib.metadata

from dirigent.engine.door.parts import Parts
from dirigent.engine.infrastructure.plugins import BlockEntry, Catalog
from dirigent.engine.shapes.problems import EngineUnavailable
from dirigent.engine.shapes.views import BlockView, StorageSchemeView, SystemInfo
from dirigent.engine.store.pool import DATABASE_ERRORS
from dirigent.engine.store.queries import api_reads
from dirigent.engine.store.schema.database import current_revision

_UNANSWERED: tuple[type[Exception], ...] = (TimeoutError, *DATABASE_ERRORS)


class System:
    def __init__(self, parts: Parts) -> None:
        self._p = parts

    def blocks(self) -> list[BlockView]:
        """The installed blocks with their published schemas (bounded by the code, not paged)."""
        entries = self._p.catalog.blocks.items()
        return [_block_view(e) for key, e in sorted(entries) if key == e.id]

    def storage_schemes(self) -> list[StorageSchemeView]:
        """The URI schemes this installation serves, ``file`` first, then by scheme."""
        return storage_schemes(self._p.catalog)

    async def ready(self) -> None:
        """Raise EngineUnavailable unless the database answers a query now."""
        try:
            await asyncio.wait_for(self._p.read(api_reads.ping), 5)
        except _UNANSWERED as err:
            raise EngineUnavailable(f"the database does not answer: {err}") from None

    async def info(self) -> SystemInfo:
        revision = await current_revision(self._p.db.direct_url)
        catalog = self._p.catalog
        return SystemInfo(
            version=_version(),
            schema_revision=revision,
            plugins=list(catalog.plugins),
            blocks=len(self.blocks()),
            storage_schemes=sorted(catalog.storage_schemes),
            connection_kinds=sorted(catalog.connection_kinds),
            notifiers=sorted(catalog.notifiers),
            enabled_unsafe_blocks=sorted(self._p.enabled_unsafe),
        )


def _block_view(entry: BlockEntry) -> BlockView:
    spec = entry.block.spec
    return BlockView(
        id=entry.id,
        kind=entry.kind,
        plugin=entry.plugin,
        group=spec.group,
        summary=spec.summary,
        description=spec.description,
        local_execution=entry.local_execution,
        connection_fields={f.field: list(f.kinds) for f in spec.connection_fields},
        config_schema=entry.config_schema,
        output_schema=entry.output_schema,
    )


def storage_schemes(catalog: Catalog) -> list[StorageSchemeView]:
    """What ``dirigent blocks list`` and the API's catalog show of storage."""
    host = StorageSchemeView(
        scheme="file",
        plugin="engine",
        summary="Files under the artifact root (file:///root/...); served when the root is a folder.",
    )
    return [host] + [
        StorageSchemeView(
            scheme=e.scheme, plugin=e.plugin, summary=e.summary, connection_kind=e.connection_kind
        )
        for _, e in sorted(catalog.storage_backends.items())
    ]


def _version() -> str:
    try:
        return importlib.metadata.version("dirigent-engine")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"
