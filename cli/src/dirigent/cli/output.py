"""The one ``-o/--output`` of every command: text for people, JSON or YAML for tools.

``auto`` (the default where a command has one) is text on a terminal and JSON in a pipe.
Commands that stream records (``run``, ``dev``, ``runs show --watch``) write NDJSON for JSON
and refuse YAML, which has no streaming form; commands that answer once write either.
"""

from __future__ import annotations

import enum
import sys
from typing import Annotated

import typer

__all__ = ["Output", "OutputOption", "streamed_as_json", "text_mode"]


class Output(enum.StrEnum):
    AUTO = "auto"
    TEXT = "text"
    JSON = "json"
    YAML = "yaml"


OutputOption = Annotated[
    Output,
    typer.Option(
        "--output",
        "-o",
        help="text (for people), json (NDJSON, one record a line) or yaml; auto: text on a "
        "terminal, json otherwise.",
    ),
]


def text_mode(output: Output) -> bool:
    return output is Output.TEXT or (output is Output.AUTO and sys.stdout.isatty())


def streamed_as_json(output: Output) -> bool:
    """Whether a streaming command writes NDJSON; YAML is refused as a usage error."""
    if output is Output.YAML:
        raise typer.BadParameter(
            "yaml has no streaming form: use -o json (NDJSON) or -o text", param_hint="--output"
        )
    return not text_mode(output)
