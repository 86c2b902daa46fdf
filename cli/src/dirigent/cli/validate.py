"""``dirigent validate PATH...``: the offline check of manifests, with no server involved.

It is the same code every door runs (``read_paths`` then ``validate_documents``), so a file
that passes here is refused by the operator, the API or ``dirigent dev`` only for reasons
that need an instance (a block missing from the catalog, a connection that does not exist).
Block config stays opaque here; checking it against installed blocks needs the catalog.
Every problem is printed, not the first: one run gives the whole list of what to fix.
"""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import Annotated

import typer

from dirigent.engine.manifests.loading import read_paths
from dirigent.engine.problems import sort_problems
from dirigent.engine.validation.documents import validate_documents


class Output(enum.StrEnum):
    TEXT = "text"
    JSON = "json"


def command(
    paths: Annotated[
        list[Path], typer.Argument(help="Manifest files or folders (every .yaml/.yml/.json).")
    ],
    output: Annotated[
        Output, typer.Option("--output", "-o", help="text for people, json for tools.")
    ] = Output.TEXT,
) -> None:
    """Validate manifests offline; exit 1 when any document has a problem."""
    docs, read_problems = read_paths(paths)
    _, problems = validate_documents(docs)
    problems = sort_problems([*read_problems, *problems])
    if output is Output.JSON:
        typer.echo(json.dumps([p.model_dump(mode="json") for p in problems], indent=2))
    elif problems:
        for p in problems:
            typer.echo(p.render())
        noun = "problem" if len(problems) == 1 else "problems"
        typer.echo(f"{len(docs)} documents, {len(problems)} {noun}", err=True)
    else:
        typer.echo(f"{len(docs)} documents, no problems")
    if problems:
        raise typer.Exit(1)
