"""The route table: one row per operation with the permission the route enforces, cells that
cannot break the table, and markers that must be there, once each, in order."""

from __future__ import annotations

import re
from typing import cast

import httpx
import pytest

from dirigent.api.app import assemble, create_app
from dirigent.api.auth import Permission, Principal
from dirigent.api.openapi import document
from dirigent.api.routetable import BEGIN, END, MarkersMissing, splice, table
from dirigent.engine import Engine

SPEC = {
    "paths": {
        "/b": {
            "post": {"summary": "Make | break.", "security": [{"HTTPBearer": ["create bs"]}]},
            "get": {"summary": "Read\n  them", "security": [{"HTTPBearer": []}]},
        },
        "/a": {"get": {"summary": "Open"}},
    }
}


def test_rows_are_ordered_and_cells_escaped() -> None:
    assert table(SPEC).splitlines()[2:] == [
        "| GET | `/a` | Open | no bearer token |",
        "| GET | `/b` | Read them | any bearer token |",
        "| POST | `/b` | Make \\| break | `create bs` |",
    ]


def test_every_api_operation_names_its_permission() -> None:
    spec = document(assemble())
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            roles = [r for req in operation.get("security", []) for r in req["HTTPBearer"]]
            if path.startswith("/api/v1/"):
                assert len(roles) == 1, (method, path, roles)
            else:
                assert roles == [], (method, path, roles)
    run = spec["paths"]["/api/v1/namespaces/{namespace}/pipelines/{name}/$run"]["post"]
    assert run["security"] == [{"HTTPBearer": ["create pipelines/run"]}]


def test_splice_replaces_only_between_the_markers() -> None:
    text = f"intro\n{BEGIN}\nold table\n{END}\noutro\n"
    assert splice(text, "new\n") == f"intro\n{BEGIN}\n\nnew\n\n{END}\noutro\n"


@pytest.mark.parametrize(
    "text",
    ["no markers\n", f"{BEGIN}\n", f"{END}\n{BEGIN}\n", f"{BEGIN}\n{END}\n{BEGIN}\n{END}\n"],
)
def test_splice_refuses_missing_or_misplaced_markers(text: str) -> None:
    with pytest.raises(MarkersMissing, match="routes:begin"):
        splice(text, "table\n")


class _Refusing:
    """An ``Auth`` that knows every token and grants nothing, noting what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def authenticate(self, token: str) -> Principal | None:
        return Principal("someone")

    async def authorize(
        self, principal: Principal, permission: Permission, namespace: str | None
    ) -> bool:
        self.asked.append(str(permission))
        return False


async def test_every_api_operation_checks_the_permission_it_documents() -> None:
    # The table is only as true as the document: what a route enforces is what it names.
    auth = _Refusing()
    app = create_app(cast(Engine, None), auth=auth)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app), base_url="http://api", headers=_BEARER
    ) as client:
        for method, path, roles in _operations():
            auth.asked.clear()
            response = await client.request(method, _url(path), json={})
            assert response.status_code == 403, (method, path, response.text)
            assert auth.asked == roles, (method, path)


_BEARER = {"Authorization": "Bearer any"}


def _operations() -> list[tuple[str, str, list[str]]]:
    """(method, path, the roles it documents) of every operation under /api/v1."""
    return [
        (method, path, operation["security"][0]["HTTPBearer"])
        for path, operations in document(assemble())["paths"].items()
        if path.startswith("/api/v1/")
        for method, operation in operations.items()
    ]


def _url(path: str) -> str:
    """``path`` with its parameters filled in validly (ids are numbers)."""
    return re.sub(r"\{[a-z_]+\}", "x", re.sub(r"\{(run_id|artifact_id)\}", "1", path))
