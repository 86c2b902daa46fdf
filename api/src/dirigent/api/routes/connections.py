"""Connections of a namespace, read-only and always redacted (secret field names only)."""

from __future__ import annotations

from fastapi import APIRouter

from dirigent.api.models import ConnectionView
from dirigent.api.routes.named import NamedReads, add_named_reads

router = APIRouter(prefix="/namespaces/{namespace}", tags=["connections"])

add_named_reads(
    router,
    NamedReads(
        plural="connections",
        kind="connection",
        model=ConnectionView,
        page=lambda engine, ns, after, limit: engine.connections(ns, cursor=after, limit=limit),
        one=lambda engine, ns, name: engine.connection(ns, name),
        list_summary="List connections (secrets redacted)",
        get_summary="One connection (secrets redacted)",
    ),
    operation="Connection",
)
