"""``dirigent validate PATH...``: the offline check of manifests, with no server involved.

It is the same code every door runs (``read_paths`` then ``validate_documents``), so a file
that passes here is refused by the operator, the API or ``dirigent dev`` only for reasons
that need an instance (a block missing from the catalog, a connection that does not exist).
Every problem is printed, not the first: one run gives the whole list of what to fix.

``--catalog`` adds the layer apply runs: each Pipeline that passed the offline layer is
checked against the blocks installed *here* (``discover()``), the same function apply calls.
Which connections exist is only known to an instance, so the Connection manifests given in
the same invocation stand in for them (same namespace). The unsafe-block gate is a worker
setting, not a property of the manifest, so it is not applied here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
import yaml

from dirigent.cli.output import Output, OutputOption, text_mode
from dirigent.engine import (
    DEFAULT_NAMESPACE,
    Catalog,
    check_against_catalog,
    discover,
    validate_documents,
)
from dirigent.engine.shapes.manifests.connection import Connection
from dirigent.engine.shapes.manifests.loading import LoadedManifest, read_paths
from dirigent.engine.shapes.manifests.pipeline import Pipeline
from dirigent.engine.shapes.problems import Problem, sort_problems


def catalog_problems(
    loaded: Sequence[LoadedManifest], offline: Sequence[Problem], catalog: Catalog
) -> list[Problem]:
    """The catalog layer for every Pipeline with no offline problem, attributed to its source."""
    flawed = {(p.file, p.document) for p in offline}
    named: dict[tuple[str, str], set[str]] = {}
    for item in loaded:
        m = item.manifest
        if isinstance(m, Connection | Pipeline):
            namespace = m.metadata.namespace or DEFAULT_NAMESPACE
            named.setdefault((m.kind, namespace), set()).add(m.metadata.name)
    out: list[Problem] = []
    for item in loaded:
        m = item.manifest
        source = (item.source.file, item.source.index)
        if not isinstance(m, Pipeline) or source in flawed:
            continue
        namespace = m.metadata.namespace or DEFAULT_NAMESPACE
        found = check_against_catalog(
            m,
            catalog,
            connections=named.get(("Connection", namespace), set()),
            pipelines=named.get(("Pipeline", namespace), set()),
            storage_schemes=catalog.storage_schemes,
        )
        out += [p.at(file=item.source.file, document=item.source.index) for p in found]
    return out


def command(
    paths: Annotated[
        list[Path], typer.Argument(help="Manifest files or folders (every .yaml/.yml/.json).")
    ],
    output: OutputOption = Output.TEXT,
    catalog: Annotated[
        bool,
        typer.Option(
            "--catalog",
            help="Also check pipelines against the blocks installed locally; connections "
            "and pipelines required must be among the manifests given.",
        ),
    ] = False,
) -> None:
    """Validate manifests offline; exit 1 when any document has a problem."""
    docs, read_problems = read_paths(paths)
    loaded, problems = validate_documents(docs)
    if catalog:
        problems += catalog_problems(loaded, problems, discover())
    problems = sort_problems([*read_problems, *problems])
    if output is Output.YAML:
        typer.echo(yaml.safe_dump([p.model_dump(mode="json") for p in problems], sort_keys=False))
    elif not text_mode(output):
        typer.echo(json.dumps([p.model_dump(mode="json") for p in problems], indent=2))
    elif problems:
        for p in problems:
            typer.echo(p.render())
        noun = "problem" if len(problems) == 1 else "problems"
        typer.echo(f"{_documents(len(docs))}, {len(problems)} {noun}", err=True)
    else:
        typer.echo(f"{_documents(len(docs))}, no problems")
    if problems:
        raise typer.Exit(1)


def _documents(count: int) -> str:
    return f"{count} document" if count == 1 else f"{count} documents"
