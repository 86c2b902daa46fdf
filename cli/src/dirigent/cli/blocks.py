"""``dirigent blocks list | docs``: what is installed here, and the block reference.

``list`` shows the catalog this machine's plugins make (what a worker started here would
serve): the blocks, then the storage schemes with the plugin that brought each, its summary
and the connection kind that opens it. ``docs`` writes ``docs/blocks.md``, committed so a
changed block shows up as a diff in review; ``--check`` (run by ``make lint``) writes nothing
and fails when the file is not what the catalog renders.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Group
from rich.text import Text

from dirigent.cli import listing, reference, replying
from dirigent.cli.output import Output, OutputOption, text_mode
from dirigent.engine import discover, storage_schemes

app = typer.Typer(no_args_is_help=True, help="The installed blocks and storage schemes.")

BLOCK_COLUMNS: list[listing.Column] = [
    ("block", lambda b: b.id),
    ("kind", lambda b: b.kind),
    ("plugin", lambda b: b.plugin),
    ("summary", lambda b: b.block.spec.summary),
]
SCHEME_COLUMNS: list[listing.Column] = [
    ("scheme", lambda s: f"{s.scheme}://"),
    ("plugin", lambda s: s.plugin),
    ("connection kind", lambda s: s.connection_kind or ""),
    ("summary", lambda s: s.summary),
]


@app.command("list")
def list_installed(output: OutputOption = Output.AUTO) -> None:
    """The blocks and storage schemes the plugins installed here contribute."""
    catalog = discover()
    blocks = [e for key, e in sorted(catalog.blocks.items()) if key == e.id]
    schemes = storage_schemes(catalog)
    if text_mode(output):
        replying.console().print(
            Group(
                listing.table(BLOCK_COLUMNS, blocks),
                Text(""),
                listing.table(SCHEME_COLUMNS, schemes),
            )
        )
        return
    for entry in blocks:
        spec = entry.block.spec
        replying.emit_record(
            "block",
            {"id": entry.id, "type": entry.kind, "plugin": entry.plugin, "summary": spec.summary},
            output,
        )
    for scheme in schemes:
        replying.emit_record("storage_scheme", scheme, output)


@app.command("docs")
def docs(
    out: Annotated[Path, typer.Option("--out", help="The reference file.", dir_okay=False)] = Path(
        "docs/blocks.md"
    ),
    check: Annotated[
        bool, typer.Option("--check", help="Write nothing; exit 1 when the file is out of date.")
    ] = False,
    plugin: Annotated[str, typer.Option("--plugin", help="Entry-point name to document.")] = (
        "builtin"
    ),
) -> None:
    """Generate the block reference from the catalog."""
    wanted = reference.render(reference.builtin_catalog(plugin))
    have = out.read_text(encoding="utf-8") if out.exists() else ""
    if check:
        if have == wanted:
            typer.echo(f"{out}: up to date")
            return
        diff = difflib.unified_diff(
            have.splitlines(keepends=True),
            wanted.splitlines(keepends=True),
            fromfile=f"{out} (on disk)",
            tofile=f"{out} (generated)",
        )
        typer.echo("".join(list(diff)[:200]))
        typer.echo(f"{out} differs from the catalog; run `dirigent blocks docs`", err=True)
        raise typer.Exit(1)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(wanted, encoding="utf-8")
    typer.echo(f"{out}: {'unchanged' if have == wanted else 'written'}")
