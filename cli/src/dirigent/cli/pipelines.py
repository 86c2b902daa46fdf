"""``dirigent pipelines list | show | export``: a server's pipelines, over the REST API.

``export`` writes the stored canonical YAML of a version, byte for byte what the server
keeps — so ``dirigent pipelines export NAME > NAME.yaml`` round-trips through ``apply -f``.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.console import Group
from rich.text import Text

from dirigent.api.client import Client
from dirigent.api.models import Page, PipelineDetail, PipelineSummary
from dirigent.cli import listing, replying
from dirigent.cli.output import Output, OutputOption
from dirigent.cli.remote import NamespaceOption, ProfileOption, Remote, TokenOption, UrlOption

app = typer.Typer(no_args_is_help=True, help="The pipelines on a server: list, show, export.")

NameArg = Annotated[str, typer.Argument(help="The pipeline's name.")]
COLUMNS: list[listing.Column] = [
    ("name", lambda p: p.name),
    ("version", lambda p: str(p.version or "")),
    ("active", lambda p: "yes" if p.active else Text("no", style="dim")),
    ("in flight", lambda p: str(p.runs_in_flight)),
    ("schedules", lambda p: str(p.schedules)),
    ("webhooks", lambda p: str(p.webhooks)),
    ("last run", lambda p: _last_run(p)),
]


def _last_run(p: PipelineSummary) -> Text:
    if p.last_run is None:
        return Text("")
    text = Text(f"{p.last_run.id} ")
    text.append(p.last_run.status, style=listing.STYLE.get(p.last_run.status, ""))
    return text


@app.command("list")
def list_pipelines(
    limit: Annotated[int, typer.Option(help="At most this many.", min=1, max=500)] = 100,
    url: UrlOption = None,
    token: TokenOption = None,
    profile: ProfileOption = None,
    namespace: NamespaceOption = None,
    output: OutputOption = Output.AUTO,
) -> None:
    """Pipelines with their current version and how their runs are doing."""
    remote = Remote(url, token, profile, namespace)

    async def read(api: Client) -> Page[PipelineSummary]:
        return await api.list_pipelines(remote.namespace, limit=limit)

    replying.emit("pipeline", remote.run(read).items, output, COLUMNS)


@app.command("show")
def show(
    name: NameArg,
    url: UrlOption = None,
    token: TokenOption = None,
    profile: ProfileOption = None,
    namespace: NamespaceOption = None,
    output: OutputOption = Output.AUTO,
) -> None:
    """One pipeline: its summary and its current document."""
    remote = Remote(url, token, profile, namespace)

    async def read(api: Client) -> tuple[PipelineDetail, str]:
        detail = await api.get_pipeline(remote.namespace, name)
        return detail, await api.export(remote.namespace, name)

    detail, document = remote.run(read)
    replying.reply(
        "pipeline",
        detail,
        output,
        lambda: Group(listing.table(COLUMNS, [detail.summary]), Text(""), Text(document.rstrip())),
    )


@app.command("export")
def export(
    name: NameArg,
    version: Annotated[
        int | None, typer.Option(help="Which version (the current one when unset).", min=1)
    ] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    profile: ProfileOption = None,
    namespace: NamespaceOption = None,
) -> None:
    """The canonical YAML of a version, on stdout (apply it elsewhere with ``apply -f``)."""
    remote = Remote(url, token, profile, namespace)
    text = remote.run(lambda api: api.export(remote.namespace, name, version))
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
