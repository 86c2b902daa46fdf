"""``dirigent crds``: write the generated CustomResourceDefinitions, or check them for drift.

Why a command and not a build step: ``crds/`` is committed (kustomize and the Helm chart copy
it), so a change to a manifest model must show up as a diff in review. ``--check`` is what CI
runs: it writes nothing and fails when ``crds/`` is not what the code generates.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated

import typer

from dirigent.engine.shapes.manifests.base import API_GROUP
from dirigent.operator import crds

# Only files matching this are ours to write, compare or remove in the output folder.
_OWNED_GLOB = f"{API_GROUP}_*.yaml"


def drift(out: Path, wanted: dict[str, str]) -> list[str]:
    """What differs between ``out`` and ``wanted``: a line per missing or stale file, and a
    unified diff per file whose text changed."""
    present = {p.name for p in out.glob(_OWNED_GLOB)} if out.is_dir() else set()
    found: list[str] = []
    for name in sorted(present | set(wanted)):
        if name not in present:
            found.append(f"missing: {out / name}\n")
        elif name not in wanted:
            found.append(f"stale (no such kind): {out / name}\n")
        else:
            have = (out / name).read_text(encoding="utf-8")
            if have != wanted[name]:
                lines = difflib.unified_diff(
                    have.splitlines(keepends=True),
                    wanted[name].splitlines(keepends=True),
                    fromfile=f"{out / name} (on disk)",
                    tofile=f"{out / name} (generated)",
                )
                found.append("".join(lines))
    return found


def write(out: Path, wanted: dict[str, str]) -> list[str]:
    """Make ``out`` hold exactly ``wanted``; the names of the files changed or removed."""
    out.mkdir(parents=True, exist_ok=True)
    changed: list[str] = []
    for stale in sorted(out.glob(_OWNED_GLOB)):
        if stale.name not in wanted:
            stale.unlink()
            changed.append(stale.name)
    for name, text in sorted(wanted.items()):
        path = out / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(name)
    return changed


_MAX_DIFF_LINES = 200


def command(
    out: Annotated[
        Path, typer.Option("--out", help="Folder for the CRD files.", file_okay=False)
    ] = Path("crds"),
    check: Annotated[
        bool,
        typer.Option("--check", help="Write nothing; exit 1 when the folder is out of date."),
    ] = False,
) -> None:
    """Generate the CustomResourceDefinitions from the manifest models."""
    wanted = crds.render_all()
    if check:
        diffs = drift(out, wanted)
        if not diffs:
            typer.echo(f"{out}: {len(wanted)} CRDs up to date")
            return
        text = "".join(diffs).splitlines()
        for line in text[:_MAX_DIFF_LINES]:
            typer.echo(line)
        if len(text) > _MAX_DIFF_LINES:
            typer.echo(f"... {len(text) - _MAX_DIFF_LINES} more diff lines")
        typer.echo(
            f"{out}: {len(diffs)} file(s) differ from what the code generates; run `dirigent crds`",
            err=True,
        )
        raise typer.Exit(1)
    changed = write(out, wanted)
    summary = ", ".join(changed) if changed else "unchanged"
    typer.echo(f"{out}: {len(wanted)} CRDs ({summary})")
