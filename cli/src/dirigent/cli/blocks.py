"""``dirigent blocks docs``: write the block reference, or check it for drift.

Why a command: ``docs/blocks.md`` is committed so a changed block shows up as a diff in
review; ``--check`` (run by ``make lint``) writes nothing and fails when the file is not
what the catalog renders.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated

import typer

from dirigent.cli import reference

app = typer.Typer(no_args_is_help=True, help="The installed blocks.")


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
