"""How the client commands print what the server answered: a table, NDJSON or YAML.

A person at a terminal reads a table; a pipe reads NDJSON (one record per line, each the
server's own response model with a ``kind``), so a script that parses the output is reading
the API. ``-o text|json|yaml`` overrides the terminal; YAML is one document per record.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Annotated, Any

import typer
import yaml
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table
from rich.text import Text

from dirigent.cli.rendering import emit_json

__all__ = [
    "Column",
    "Format",
    "FormatOption",
    "ago",
    "console",
    "emit",
    "emit_record",
    "record",
    "seconds",
    "styled",
    "table",
    "text_mode",
]

STYLE = {
    "succeeded": "green",
    "completed_with_errors": "yellow",
    "failed": "red",
    "upstream_failed": "red",
    "cancelled": "magenta",
    "running": "cyan",
    "queued": "blue",
    "waiting": "blue",
    "skipped": "dim",
}


class Format(enum.StrEnum):
    AUTO = "auto"
    TEXT = "text"
    JSON = "json"
    YAML = "yaml"


FormatOption = Annotated[
    Format,
    typer.Option(
        "--output",
        "-o",
        help="text (a table), json (NDJSON, one record a line) or yaml; auto: text on a "
        "terminal, json otherwise.",
    ),
]

Column = tuple[str, Callable[[Any], str | Text]]


def text_mode(fmt: Format) -> bool:
    return fmt is Format.TEXT or (fmt is Format.AUTO and sys.stdout.isatty())


def console() -> Console:
    return Console(highlight=False, soft_wrap=True)


def record(kind: str, model: BaseModel | dict[str, Any]) -> dict[str, Any]:
    data = model.model_dump(mode="json") if isinstance(model, BaseModel) else dict(model)
    if "kind" in data:  # a model's own kind (an apply plan's Pipeline) reads as "manifest"
        data["manifest"] = data.pop("kind")
    return {"kind": kind, **data}


def emit_record(kind: str, model: BaseModel | dict[str, Any], fmt: Format) -> None:
    """One record as NDJSON or a YAML document (the caller renders text itself)."""
    if fmt is Format.YAML:
        sys.stdout.write("---\n" + yaml.safe_dump(record(kind, model), sort_keys=False))
    else:
        emit_json(record(kind, model))


def emit(kind: str, items: Sequence[BaseModel], fmt: Format, columns: Sequence[Column]) -> None:
    """A listing: a table for a person, else one record per item."""
    if text_mode(fmt):
        console().print(table(columns, items) if items else Text(f"no {kind}s", style="dim"))
        return
    for item in items:
        emit_record(kind, item, fmt)


def table(columns: Sequence[Column], rows: Iterable[Any]) -> Table:
    out = Table(box=None, pad_edge=False, header_style="bold")
    for name, _ in columns:
        out.add_column(name)
    for row in rows:
        out.add_row(*(cell(row) for _, cell in columns))
    return out


def styled(status: str) -> Text:
    return Text(status, style=STYLE.get(status, ""))


def ago(when: datetime | None) -> str:
    """A timestamp as a person reads it: local time to the second."""
    if when is None:
        return ""
    return when.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def seconds(start: datetime | None, end: datetime | None) -> str:
    if start is None or end is None:
        return ""
    return f"{(end - start).total_seconds():.1f}s"
