"""Read routes of a namespace's named resources: a keyset page by name, and one by name.

Connections, schedules and webhooks are read the same way — ``GET .../{kind}s`` answers a
``{items, next}`` page ordered by name, ``GET .../{kind}s/{name}`` the one view or a 404
Problem — each behind its own ``list`` and ``get`` permission on ``{kind}s``, served by the
engine's reads of the same names (``Engine.connections`` and ``Engine.connection``). The
shape is made here once; a resource's router names only its kind, its view and its words.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Path
from pydantic import BaseModel

from dirigent.api.deps import ENTITY_NAME, After, EngineDep, Limit, Namespace, allowed
from dirigent.api.models import Page
from dirigent.api.problems import existing
from dirigent.engine import Engine

__all__ = ["Name", "add_named_reads"]

Name = Annotated[
    str, Path(min_length=1, max_length=63, pattern=ENTITY_NAME, description="The name.")
]


def add_named_reads(
    router: APIRouter, model: type[BaseModel], kind: str, list_summary: str, get_summary: str
) -> None:
    """Add ``list<Kind>s`` and ``get<Kind>`` for ``kind`` (``connection``), whose views are
    ``model``, read by ``Engine.<kind>s`` (a page) and ``Engine.<kind>`` (one or None)."""
    plural = f"{kind}s"
    page: Callable[..., Awaitable[Any]] = getattr(Engine, plural)
    one: Callable[..., Awaitable[Any]] = getattr(Engine, kind)

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
        return await page(engine, namespace, cursor=after, limit=limit)

    @router.get(
        f"/{plural}/{{name}}",
        operation_id=f"get{kind.capitalize()}",
        summary=get_summary,
        response_model=model,
        dependencies=[allowed("get", plural)],
        name=f"get_{kind}",
    )
    async def get(engine: EngineDep, namespace: Namespace, name: Name) -> Any:
        return existing(await one(engine, namespace, name), kind, name, namespace)
