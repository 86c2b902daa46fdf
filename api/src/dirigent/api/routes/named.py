"""Read routes of a namespace's named resources: a keyset page by name, and one by name.

Connections, schedules and webhooks are read the same way — ``GET .../{kind}s`` answers a
``{items, next}`` page ordered by name, ``GET .../{kind}s/{name}`` the one view or a 404
Problem — each behind its own ``list`` and ``get`` permission on ``{kind}s``, served by the
engine's reads the caller names (``engine.connections.page`` and ``engine.connections.get``). The
shape is made here once; a resource's router names only its kind, its view and its words.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Path
from pydantic import BaseModel

from dirigent.api.deps import After, EngineDep, Limit, Namespace, allowed
from dirigent.api.models import Page
from dirigent.api.problems import existing
from dirigent.engine import Engine
from dirigent.sdk import ENTITY_NAME_PATTERN

__all__ = ["Name", "add_named_reads"]

Name = Annotated[
    str, Path(min_length=1, max_length=63, pattern=ENTITY_NAME_PATTERN, description="The name.")
]


Read = Callable[[Engine], Callable[..., Awaitable[Any]]]


def add_named_reads(
    router: APIRouter,
    model: type[BaseModel],
    kind: str,
    list_summary: str,
    get_summary: str,
    *,
    page: Read,
    one: Read,
) -> None:
    """Add ``list<Kind>s`` and ``get<Kind>`` for ``kind`` (``connection``), whose views are
    ``model``, read by the facet methods ``page`` (a page) and ``one`` (one or None) pick."""
    plural = f"{kind}s"

    @router.get(
        f"/{plural}",
        operation_id=f"list{kind.capitalize()}s",
        summary=list_summary,
        response_model=Page[model],  # type: ignore[valid-type]
        dependencies=[allowed("list", plural)],
        name=f"list_{plural}",
    )
    async def listing(
        engine: EngineDep, namespace: Namespace, limit: Limit = 50, after: After = None
    ) -> Any:
        return await page(engine)(namespace, cursor=after, limit=limit)

    @router.get(
        f"/{plural}/{{name}}",
        operation_id=f"get{kind.capitalize()}",
        summary=get_summary,
        response_model=model,
        dependencies=[allowed("get", plural)],
        name=f"get_{kind}",
    )
    async def get(engine: EngineDep, namespace: Namespace, name: Name) -> Any:
        return existing(await one(engine)(namespace, name), kind, name, namespace)
