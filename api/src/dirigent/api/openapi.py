"""The OpenAPI document: generated from the assembled app, committed as docs/openapi.json.

FastAPI describes every error response as ``application/json``; ours are
``application/problem+json`` (``ProblemDocument``), so the document is rewritten once here —
every 4xx/5xx response names the Problem schema under that media type, and FastAPI's own
validation-error schemas, which we never send, are dropped. Each operation's permission is
named as the role of its bearer-scheme requirement (``deps.allowed``), which is where the
route table in docs/api.md (``routetable``) reads it.
"""

from __future__ import annotations

import json
from typing import Any, cast

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from dirigent.api.models import PROBLEM_JSON

_UNSENT = ("HTTPValidationError", "ValidationError")
_PROBLEM_REF = {"$ref": "#/components/schemas/ProblemDocument"}


def document(app: FastAPI) -> dict[str, Any]:
    spec = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
    )
    for path in spec.get("paths", {}).values():
        for operation in path.values():
            for status, response in operation.get("responses", {}).items():
                if status[0] in "45":
                    response["content"] = {PROBLEM_JSON: {"schema": _PROBLEM_REF}}
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    for name in _UNSENT:
        schemas.pop(name, None)
    return spec


def install_document(app: FastAPI) -> None:
    """Serve the rewritten document at /openapi.json (built once, on first request)."""
    cached: dict[str, Any] = {}

    def openapi() -> dict[str, Any]:
        if not cached:
            cached.update(document(app))
        return cached

    app.openapi = openapi  # type: ignore[method-assign]


def render() -> str:
    """The committed text of docs/openapi.json."""
    from dirigent.api.app import assemble
    from dirigent.api.routes.hooks import hooks_router
    from dirigent.engine import Engine

    # The document needs the intake route's shape, never its engine.
    app = assemble([hooks_router(cast(Engine, None))])
    return json.dumps(app.openapi(), indent=2, sort_keys=True) + "\n"
