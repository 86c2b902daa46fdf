"""How a command's answer looks: a rendering for a person, NDJSON for everything else.

The terminal decides: stdout on a terminal reads the rendering (a live step table for a
followed run), a pipe, a container or CI reads NDJSON — one JSON object per line, each with
a ``kind``. ``--output json|text`` overrides either way. Diagnostics always go to stderr, so
``2>/dev/null`` leaves a clean record stream.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Protocol

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from dirigent.cli.output import Output, streamed_as_json
from dirigent.cli.watching import Record
from dirigent.engine.shapes.views import RunDetail

__all__ = ["RunRenderer", "emit_json", "is_json", "run_renderer"]


_STYLE = {
    "succeeded": "green",
    "completed_with_errors": "yellow",
    "failed": "red",
    "upstream_failed": "red",
    "cancelled": "magenta",
    "running": "cyan",
    "waiting": "blue",
    "skipped": "dim",
}


def is_json(output: Output) -> bool:
    """A streaming command's choice: NDJSON or text (YAML is refused, it cannot stream)."""
    return streamed_as_json(output)


def emit_json(record: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(record, default=str, separators=(",", ":")) + "\n")
    sys.stdout.flush()


class RunRenderer(Protocol):
    def __enter__(self) -> RunRenderer: ...
    def __exit__(self, *exc: object) -> None: ...
    def record(self, record: Record, detail: RunDetail) -> None: ...
    def line(self, record: Record) -> None: ...


class JsonRenderer:
    """One record per line; a ``step`` record always carries ``step``, ``status`` and ``item``."""

    def __enter__(self) -> JsonRenderer:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def record(self, record: Record, detail: RunDetail) -> None:
        emit_json(record)

    def line(self, record: Record) -> None:
        emit_json(record)


class TextRenderer:
    """Log lines scroll; the steps sit in a table under them, redrawn as they move."""

    def __init__(self, live: bool) -> None:
        self.console = Console(highlight=False, soft_wrap=True)
        self.errors = Console(stderr=True, highlight=False, soft_wrap=True)
        self._live = Live(console=self.console, auto_refresh=False) if live else None
        self._detail: RunDetail | None = None

    def __enter__(self) -> TextRenderer:
        if self._live is not None:
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.update(self._table(), refresh=True)
            self._live.__exit__(None, None, None)

    def record(self, record: Record, detail: RunDetail) -> None:
        self._detail = detail
        kind = record["kind"]
        if kind == "log":
            self._log(record)
        elif kind == "failure":
            self._failure(record)
        elif self._live is None and kind == "step":
            self.console.print(f"step {record['step']}: {_word(record['status'])}")
        if self._live is not None:
            self._live.update(self._table(), refresh=True)

    def line(self, record: Record) -> None:
        text = record.get("text") or " ".join(f"{k}={v}" for k, v in record.items())
        self.console.print(str(text))

    def _log(self, record: Record) -> None:
        where = f"{record['step']}: " if record.get("step") else ""
        fields = " ".join(f"{k}={v}" for k, v in (record.get("fields") or {}).items())
        text = Text(f"  {record['level']:<7} ", style="dim")
        text.append(f"{where}{record['message']}")
        if fields:
            text.append(f"  {fields}", style="dim")
        self.console.print(text)

    def _failure(self, r: Record) -> None:
        at_item = f" item {r['item']}" if r.get("item") is not None else ""
        self.errors.print(
            f"failed: step {r['step']}{at_item} (block {r['block']}, attempt {r['attempt']}): "
            f"{r['error_message']}\n        error class {r['error_class']}, code {r['error_code']}",
            style="red",
        )

    def _table(self) -> Group | Table:
        detail = self._detail
        table = Table(box=None, pad_edge=False, header_style="bold")
        for column in ("step", "block", "status", "items", "attempts", "duration"):
            table.add_column(column)
        if detail is None:
            return table
        for s in detail.steps:
            items = (
                f"{s.items_by_status.get('succeeded', 0)}/{s.items}" if s.items is not None else ""
            )
            took = f"{s.duration_seconds:.2f}s" if s.duration_seconds is not None else ""
            table.add_row(
                s.step,
                s.block,
                Text(s.status, style=_STYLE.get(s.status, "")),
                items,
                str(s.attempts),
                took,
            )
        head = Text(f"run {detail.id} of {detail.pipeline}: ")
        head.append(detail.status, style=_STYLE.get(detail.status, "bold"))
        return Group(head, table)


def _word(status: str) -> str:
    return status.replace("_", " ") if status == "upstream_failed" else status


def run_renderer(output: Output) -> RunRenderer:
    if is_json(output):
        return JsonRenderer()
    return TextRenderer(live=sys.stdout.isatty())
