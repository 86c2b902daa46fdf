"""``dirigent openapi``: write the API's generated documents, or with ``--check`` their drift.

Two files follow from the code: docs/openapi.json (the OpenAPI document of the assembled
app) and the route table in docs/api.md (rendered from that document, between its markers).
One command writes both, so a route added in code reaches both with one run; ``--check``
writes nothing and fails, naming each stale file with the first lines of its diff
(``make lint`` runs it).
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Annotated

import typer

from dirigent.api.openapi import render
from dirigent.api.routetable import MarkersMissing, splice, table
from dirigent.cli import process

OPENAPI_PATH = Path("docs/openapi.json")
ROUTES_PATH = Path("docs/api.md")


def command(
    check: Annotated[bool, typer.Option(help="Fail when a committed file is stale.")] = False,
    out: Annotated[Path, typer.Option(help="Where the OpenAPI document lives.")] = OPENAPI_PATH,
    routes: Annotated[
        Path, typer.Option(help="The Markdown file holding the route table.")
    ] = ROUTES_PATH,
) -> None:
    """Write docs/openapi.json and docs/api.md's route table, or with --check fail on drift."""
    document = render()
    wanted = {out: document, routes: _with_table(routes, document)}
    stale = {path: text for path, text in wanted.items() if _read(path) != text}
    if check:
        for path, text in stale.items():
            typer.echo(_diff(path, text), err=True)
        if stale:
            names = " and ".join(str(p) for p in stale)
            verb = "is" if len(stale) == 1 else "are"
            process.fail(f"{names} {verb} stale: run `dirigent openapi`")
        typer.echo(f"{out} and the route table in {routes} are up to date")
        return
    for path, text in stale.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        typer.echo(f"wrote {path}")


def _with_table(routes: Path, document: str) -> str:
    """``routes``' text with its route table rendered from ``document``."""
    if not routes.exists():
        process.fail(f"{routes} does not exist: it holds the route table", process.EXIT_USAGE)
    try:
        return splice(_read(routes), table(json.loads(document)))
    except MarkersMissing as err:
        process.fail(f"{routes}: {err}", process.EXIT_USAGE)


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.exists() else ""


def _diff(path: Path, wanted: str) -> str:
    diff = difflib.unified_diff(
        _read(path).splitlines(keepends=True),
        wanted.splitlines(keepends=True),
        fromfile=f"{path} (committed)",
        tofile=f"{path} (generated)",
        n=1,
    )
    return "".join(list(diff)[:200])
