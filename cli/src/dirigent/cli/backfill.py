"""``dirigent backfill PIPELINE --schedule S --from WHEN --to WHEN``: the windows a cadence
already went past, one run each, through the server's ``$backfill``.

``[from, to)`` is half-open, so adjacent backfills tile; a date alone is midnight UTC.
``--dry-run`` lists the windows and creates nothing. Params (``-p``/``-P``) are typed against
the pipeline's own schema, read from the server; without them each run gets the schedule's.
A window the pipeline's concurrency policy refuses is listed with its problem and the exit
code is 1, so a script notices a partial backfill.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from dirigent.api.client import Client
from dirigent.api.models import BackfillResult, BackfillWindow, PipelineDetail
from dirigent.cli import listing, replying
from dirigent.cli.output import Output, OutputOption, text_mode
from dirigent.cli.params import build_params
from dirigent.cli.remote import NamespaceOption, ProfileOption, Remote, TokenOption, UrlOption
from dirigent.cli.replying import EXIT_FAILED, EXIT_USAGE
from dirigent.engine.shapes.problems import ProblemsError

COLUMNS: list[listing.Column] = [
    ("from", lambda w: w.start.isoformat()),
    ("to", lambda w: w.end.isoformat()),
    ("run", lambda w: str(w.run_id) if w.run_id is not None else ""),
    ("status", lambda w: listing.styled(w.status) if w.status else _refusal(w)),
]


def _refusal(w: BackfillWindow) -> str:
    return "; ".join(f"{p.message} [{p.code}]" for p in w.problems)


def parse_when(text: str, flag: str) -> datetime:
    """RFC 3339 (``2026-01-31T05:00:00Z``) or a date (midnight UTC); naive means UTC."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        replying.fail(
            f"{flag} {text!r}: expected a date (2026-01-31) or an RFC 3339 date-time "
            "(2026-01-31T05:00:00Z)",
            EXIT_USAGE,
        )
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _params(
    remote: Remote, pipeline: str, files: list[Path], flags: list[str]
) -> dict[str, Any] | None:
    if not files and not flags:
        return None
    return server_params(remote, pipeline, files, flags)


def server_params(
    remote: Remote, pipeline: str, files: list[Path], flags: list[str]
) -> dict[str, Any]:
    """``-p``/``-P`` typed against the params schema of the pipeline as the server holds it."""
    detail = remote.run(lambda api: api.get_pipeline(remote.namespace, pipeline))
    return params_for(detail, files, flags)


def params_for(detail: PipelineDetail, files: list[Path], flags: list[str]) -> dict[str, Any]:
    """``-p``/``-P`` typed against ``detail``'s params schema; a refusal is exit 2."""
    spec = (detail.document or {}).get("spec") or {}
    try:
        return build_params(spec.get("params"), files, flags)
    except ProblemsError as err:
        replying.fail(
            f"the params are not valid for pipeline {detail.summary.name}",
            EXIT_USAGE,
            err.problems,
        )


def command(
    pipeline: Annotated[str, typer.Argument(help="The pipeline to backfill.")],
    schedule: Annotated[
        str, typer.Option("--schedule", "-s", help="Whose cadence draws the windows.")
    ],
    start: Annotated[str, typer.Option("--from", help="First firing included (date or RFC 3339).")],
    end: Annotated[str, typer.Option("--to", help="Firings before this instant (excluded).")],
    param: Annotated[
        list[str] | None,
        typer.Option("-p", "--param", help="path=value, typed by the params schema; repeat."),
    ] = None,
    params_file: Annotated[
        list[Path] | None, typer.Option("-P", "--params-file", help="A YAML/JSON file of params.")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List the windows; create no run.")
    ] = False,
    url: UrlOption = None,
    token: TokenOption = None,
    profile: ProfileOption = None,
    namespace: NamespaceOption = None,
    output: OutputOption = Output.AUTO,
) -> None:
    """One run per window of a schedule's cadence in [--from, --to), oldest first."""
    since, until = parse_when(start, "--from"), parse_when(end, "--to")
    remote = Remote(url, token, profile, namespace)
    values = _params(remote, pipeline, params_file or [], param or [])

    async def fill(api: Client) -> BackfillResult:
        return await api.backfill(
            remote.namespace,
            pipeline,
            schedule=schedule,
            start=since,
            end=until,
            params=values,
            dry_run=dry_run,
        )

    result = remote.run(fill)
    # A dry run's ids were rolled back with it: show none.
    shown = [w.model_copy(update={"run_id": None}) if dry_run else w for w in result.windows]
    replying.reply("backfill", result, output, lambda: listing.table(COLUMNS, shown))
    if text_mode(output):
        made = "would create" if dry_run else "created"
        typer.echo(
            f"{len(result.windows)} window(s) of {schedule}: {result.created} run(s) {made}, "
            f"{result.refused} refused",
            err=True,
        )
    if result.refused:
        raise typer.Exit(EXIT_FAILED)
