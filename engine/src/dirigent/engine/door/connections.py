"""The connections facet: stored connections (secrets redacted to field names), checked here.

A check opens the sealed fields in this process (the operator's, which sealed them), runs the
kind's ``check()`` with a deadline and never raises for the connection's sake.
"""

from __future__ import annotations

from typing import Any

from dirigent.engine.door.paging import checked_limit, page_of
from dirigent.engine.door.parts import Parts
from dirigent.engine.runtime.health import ConnectionHealth, check_opened
from dirigent.engine.shapes.views import ConnectionView, Page, decode_key
from dirigent.engine.store.queries import api_reads
from dirigent.engine.store.transactions import connections as connections_store


class Connections:
    def __init__(self, parts: Parts) -> None:
        self._p = parts

    async def page(
        self, namespace: str, *, cursor: str | None = None, limit: int = 100
    ) -> Page[ConnectionView]:
        """Connections by name, secrets redacted to their field names."""
        after = decode_key(cursor, str)
        rows = await self._p.read(
            lambda c: api_reads.connections(c, namespace, after=after, limit=checked_limit(limit))
        )
        return page_of(rows, limit, lambda r: (r.name,))

    async def get(self, namespace: str, name: str) -> ConnectionView | None:
        return await self._p.read(lambda c: api_reads.connection(c, namespace, name))

    async def check(
        self, namespace: str, name: str, *, within: float = 30.0
    ) -> ConnectionHealth | None:
        """Run the connection kind's ``check()`` here, with the connection opened (its sealed
        fields need this engine's secret key); None when there is no such connection.

        Never raises for the connection's sake: see ``runtime.health`` for the reasons.
        """
        view = await self.get(namespace, name)
        if view is None:
            return None
        sealer = self._p.sealer
        secrets: set[str] = set()

        async def opened() -> dict[str, Any]:
            found = await self._p.read(
                lambda c: connections_store.open_connection(
                    c, namespace, name, sealer, secrets_out=secrets
                )
            )
            return found if found is not None else {}

        kind = self._p.catalog.connection_kinds.get(view.type)
        return await check_opened(view.type, kind, opened, within=within, secrets=secrets)
