"""The pipelines facet: stored pipelines, their versions and summaries, re-checked on demand."""

from __future__ import annotations

from dirigent.engine.door.paging import checked_limit, page_of
from dirigent.engine.door.parts import Parts
from dirigent.engine.rules.validation.catalog import check_against_catalog
from dirigent.engine.rules.validation.pipelines import check_pipeline
from dirigent.engine.shapes.manifests.export import to_yaml
from dirigent.engine.shapes.manifests.loading import parse_manifest
from dirigent.engine.shapes.manifests.pipeline import Pipeline
from dirigent.engine.shapes.problems import Problem
from dirigent.engine.shapes.views import Page, PipelineSummary, PipelineVersionView, decode_key
from dirigent.engine.store.queries import api_reads, reads
from dirigent.engine.store.transactions import connections as connections_store
from dirigent.engine.store.transactions import definitions
from dirigent.engine.store.transactions.definitions import PipelineRecord


class Pipelines:
    def __init__(self, parts: Parts) -> None:
        self._p = parts

    async def page(
        self, namespace: str, *, cursor: str | None = None, limit: int = 100
    ) -> Page[PipelineSummary]:
        after = decode_key(cursor, str)
        rows = await self._p.read(
            lambda c: reads.pipeline_summaries(
                c, namespace, after=after, limit=checked_limit(limit)
            )
        )
        return page_of(rows, limit, lambda r: (r.name,))

    async def get(self, namespace: str, name: str) -> PipelineRecord | None:
        return await self._p.read(lambda c: definitions.get_pipeline(c, namespace, name))

    async def summary(self, namespace: str, name: str) -> PipelineSummary | None:
        """One pipeline's summary (runs in flight, newest run): what its status shows."""
        rows = await self._p.read(
            lambda c: reads.pipeline_summaries(c, namespace, after=None, limit=1, only=name)
        )
        return rows[0] if rows else None

    async def versions(
        self, namespace: str, name: str, *, cursor: str | None = None, limit: int = 100
    ) -> Page[PipelineVersionView] | None:
        """A pipeline's versions, newest first; None when there is no such pipeline."""
        before = decode_key(cursor, int)
        rows = await self._p.read(
            lambda c: api_reads.pipeline_versions(
                c, namespace, name, before=before, limit=checked_limit(limit)
            )
        )
        return None if rows is None else page_of(rows, limit, lambda r: (r.number,))

    async def export(self, namespace: str, name: str, version: int | None = None) -> str | None:
        """The canonical YAML of a stored version (the current one by default)."""
        doc = await self._p.read(lambda c: api_reads.version_document(c, namespace, name, version))
        return None if doc is None else to_yaml(doc)

    async def check_stored(self, namespace: str, name: str) -> list[Problem] | None:
        """Re-check the current version against today's catalog and connections."""
        doc = await self._p.read(lambda c: api_reads.version_document(c, namespace, name, None))
        if doc is None:
            return None
        manifest, problems = parse_manifest(doc)
        if not isinstance(manifest, Pipeline):
            return problems
        names = await self._p.read(lambda c: connections_store.connection_kinds(c, namespace))
        required = manifest.required_pipelines
        active = await self._p.read(lambda c: definitions.active_among(c, namespace, required))
        return check_pipeline(manifest) + check_against_catalog(
            manifest,
            self._p.catalog,
            connections=names,
            enabled_unsafe=self._p.enabled_unsafe,
            pipelines=active,
            storage_schemes=self._p.catalog.storage_schemes,
        )
