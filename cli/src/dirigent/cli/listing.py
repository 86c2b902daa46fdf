"""The cells of a table a person reads: columns, status colours, times as people read them.

What is printed, and when a table is printed rather than records, is ``replying``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from rich.table import Table
from rich.text import Text

__all__ = ["STYLE", "Column", "ago", "seconds", "styled", "table"]

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


Column = tuple[str, Callable[[Any], str | Text]]


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
