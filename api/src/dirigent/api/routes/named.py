"""Read routes of a namespace's named resources: a keyset page by name, and one by name.

Connections, schedules and webhooks are read the same way — ``GET .../{plural}`` answers a
``{items, next}`` page ordered by name, ``GET .../{plural}/{name}`` the one view or a 404
Problem — each behind its own ``list`` and ``get`` permission. The shape is made here once;
a resource's router says only what differs (its engine reads, model and words).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar

from fastapi import APIRouter, Depends, Path
from pydantic import BaseModel

from dirigent.api.deps import ENTITY_NAME, After, EngineDep, Limit, Namespace, allowed
from dirigent.api.models import Page
from dirigent.api.problems import existing
from dirigent.engine import Engine

__all__ = ["Name", "NamedReads", "add_named_reads"]

V = TypeVar("V", bound=BaseModel)

Name = Annotated[
    str, Path(min_length=1, max_length=63, pattern=ENTITY_NAME, description="The name.")
]


@dataclass(frozen=True)
class NamedReads(Generic[V]):
    """One resource's reads: ``plural`` is its path segment and RBAC resource, ``kind`` the
    word of its 404 (``connection.not_found``)."""

    plural: str
    kind: str
    model: type[V]
    page: Callable[[Engine, str, str | None, int], Awaitable[Page[V]]]
    one: Callable[[Engine, str, str], Awaitable[V | None]]
    list_summary: str
    get_summary: str


def add_named_reads(router: APIRouter, reads: NamedReads[Any], *, operation: str) -> None:
    """Add the listing (``list<operation>s``) and the one view (``get<operation>``)."""

    @router.get(
        f"/{reads.plural}",
        operation_id=f"list{operation}s",
        summary=reads.list_summary,
        response_model=Page[reads.model],  # type: ignore[name-defined]
        dependencies=[Depends(allowed("list", reads.plural))],
        name=f"list_{reads.plural}",
    )
    async def listing(
        engine: EngineDep, namespace: Namespace, limit: Limit = 50, after: After = None
    ) -> Any:
        return await reads.page(engine, namespace, after, limit)

    @router.get(
        f"/{reads.plural}/{{name}}",
        operation_id=f"get{operation}",
        summary=reads.get_summary,
        response_model=reads.model,
        dependencies=[Depends(allowed("get", reads.plural))],
        name=f"get_{reads.kind}",
    )
    async def one(engine: EngineDep, namespace: Namespace, name: Name) -> Any:
        return existing(await reads.one(engine, namespace, name), reads.kind, name, namespace)
