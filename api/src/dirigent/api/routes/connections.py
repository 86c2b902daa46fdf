"""Connections of a namespace, read-only and always redacted (secret field names only)."""

from __future__ import annotations

from fastapi import APIRouter

from dirigent.api.deps import (
    After,
    CanGetConnections,
    CanListConnections,
    ConnectionName,
    EngineDep,
    Limit,
    Namespace,
)
from dirigent.api.models import ConnectionView, Page
from dirigent.api.problems import not_found

router = APIRouter(prefix="/namespaces/{namespace}/connections", tags=["connections"])


@router.get("", operation_id="listConnections", summary="List connections (secrets redacted)")
async def list_connections(
    engine: EngineDep,
    _: CanListConnections,
    namespace: Namespace,
    limit: Limit = 50,
    after: After = None,
) -> Page[ConnectionView]:
    return await engine.connections(namespace, cursor=after, limit=limit)


@router.get("/{name}", operation_id="getConnection", summary="One connection (secrets redacted)")
async def get_connection(
    engine: EngineDep, _: CanGetConnections, namespace: Namespace, name: ConnectionName
) -> ConnectionView:
    found = await engine.connection(namespace, name)
    if found is None:
        raise not_found("connection", name, namespace)
    return found
