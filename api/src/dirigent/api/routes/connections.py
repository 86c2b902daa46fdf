"""Connections of a namespace, read-only and always redacted (secret field names only)."""

from __future__ import annotations

from fastapi import APIRouter

from dirigent.api.models import ConnectionView
from dirigent.api.routes.named import add_named_reads

router = APIRouter(prefix="/namespaces/{namespace}", tags=["connections"])

add_named_reads(
    router,
    ConnectionView,
    "connection",
    list_summary="List connections (secrets redacted)",
    get_summary="One connection (secrets redacted)",
    page=lambda e: e.connections.page,
    one=lambda e: e.connections.get,
)
