"""How every client command answers, in one place: records on stdout, one line on stderr.

A client command (``runs``, ``pipelines``, ``apply``, ``backfill``, ``run NAME``) does three
things: calls the server through ``remote.Remote`` (which maps every failure to the exit codes
below), prints what came back, and exits. This module is the printing and the exiting:

- **records**: a person at a terminal reads a table or a line (``text``); a pipe reads NDJSON,
  one record per line, each the server's own response model with a ``kind`` (``json``), so a
  script that parses the output is reading the API; ``-o yaml`` is one document per record.
  ``reply`` takes one answer, ``emit`` a listing;
- **problems**: ``fail`` writes ``error: <what>`` and, for located problems, one line each
  under it (``where: location: message [code]``), then exits with a code a script can
  branch on. Diagnostics never go to stdout, so ``2>/dev/null`` leaves a clean stream.

====  =====================================================================================
0     done
1     the server refused (its Problem code and message) or what was asked for finished badly
      (a run that failed, an apply with problems, a backfill window refused)
2     usage: a bad flag, file or parameter, no server configured, a profile that cannot be used
3     the server could not be reached (not running, wrong URL, timed out)
====  =====================================================================================
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn

import typer
import yaml
from pydantic import BaseModel
from rich.console import Console, RenderableType
from rich.text import Text

from dirigent.cli import listing
from dirigent.cli.output import Output, text_mode
from dirigent.cli.rendering import emit_json
from dirigent.engine.shapes.problems import Problem

__all__ = [
    "EXIT_FAILED",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "console",
    "emit",
    "emit_record",
    "fail",
    "print_problems",
    "record",
    "reply",
]

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3


def console() -> Console:
    return Console(highlight=False, soft_wrap=True)


def record(kind: str, model: BaseModel | dict[str, Any]) -> dict[str, Any]:
    data = model.model_dump(mode="json") if isinstance(model, BaseModel) else dict(model)
    if "kind" in data:  # a model's own kind (an apply plan's Pipeline) reads as "manifest"
        data["manifest"] = data.pop("kind")
    return {"kind": kind, **data}


def emit_record(kind: str, model: BaseModel | dict[str, Any], fmt: Output) -> None:
    """One record as NDJSON or a YAML document (text is the caller's: see ``reply``)."""
    if fmt is Output.YAML:
        sys.stdout.write("---\n" + yaml.safe_dump(record(kind, model), sort_keys=False))
        sys.stdout.flush()
    else:
        emit_json(record(kind, model))


def reply(
    kind: str,
    model: BaseModel | dict[str, Any],
    fmt: Output,
    text: Callable[[], RenderableType],
) -> None:
    """One answer: ``text()`` rendered for a person, else the record."""
    if text_mode(fmt):
        shown = text()
        console().print(Text(shown) if isinstance(shown, str) else shown)  # no markup in words
    else:
        emit_record(kind, model, fmt)


def emit(
    kind: str, items: Sequence[BaseModel], fmt: Output, columns: Sequence[listing.Column]
) -> None:
    """A listing: a table for a person, else one record per item."""
    if text_mode(fmt):
        shown = listing.table(columns, items) if items else Text(f"no {kind}s", style="dim")
        console().print(shown)
        return
    for item in items:
        emit_record(kind, item, fmt)


def print_problems(problems: Iterable[Problem], where: str = "") -> None:
    """Each problem on its own stderr line: ``where: file#doc: location: message [code]``."""
    for p in problems:
        typer.echo(f"  {where + ': ' if where else ''}{p.render()}", err=True)


def fail(message: str, code: int, problems: Iterable[Problem] = ()) -> NoReturn:
    """``error: message`` on stderr, each problem under it, then exit with ``code``."""
    typer.echo(f"error: {message}", err=True)
    print_problems(problems)
    raise typer.Exit(code)
