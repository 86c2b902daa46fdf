"""``dirigent apply -f FILE|DIR``: manifests sent to a server's REST apply, or planned there.

Every document of every file is sent on its own to ``POST …/pipelines/$apply`` — the same
validation as the operator and ``dirigent dev`` — Pipelines before Schedules (a Schedule names
its Pipeline). ``--dry-run`` asks the server for the plan instead and writes nothing: per
document *created*, *changed* (with the steps added, removed and changed and the other fields
that moved) or *unchanged*, and the problems of a document the server refuses, located as
``file#document: location``. Secret documents are not sent (a cluster keeps them; the API
never takes secret values) and Connections and Webhooks are refused by the API for the same
reason: apply those with ``kubectl``, or run the folder with ``dirigent dev``.

Exit 0 when every document was applied (or would be), 1 when the server refused any, 2 when
a file cannot be read or parsed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from dirigent.api.client import ApiError, Client
from dirigent.api.models import ApplyPlan
from dirigent.cli import listing, process
from dirigent.cli.listing import Format, FormatOption
from dirigent.cli.remote import (
    EXIT_REFUSED,
    NamespaceOption,
    ProfileOption,
    Remote,
    TokenOption,
    UrlOption,
    print_problems,
)
from dirigent.engine.manifests.loading import SourceDocument, read_paths
from dirigent.engine.problems import Problem

_ORDER = {"Connection": 0, "Pipeline": 1, "Schedule": 2, "Webhook": 3}
_WORDS = {"created": "created", "updated": "changed", "activated": "activated"}


@dataclass
class Outcome:
    doc: SourceDocument
    plan: ApplyPlan | None = None
    problems: list[Problem] = field(default_factory=list)
    code: str = ""


def _kind(doc: SourceDocument) -> str:
    return str(doc.data.get("kind", "")) if isinstance(doc.data, dict) else ""


def _is_secret(doc: SourceDocument) -> bool:
    data = doc.data
    return (
        isinstance(data, dict) and data.get("apiVersion") == "v1" and data.get("kind") == "Secret"
    )


def _where(doc: SourceDocument) -> str:
    return f"{doc.file}#{doc.index}" if doc.index is not None else str(doc.file)


async def _send(
    api: Client, namespace: str, docs: list[SourceDocument], dry_run: bool
) -> list[Outcome]:
    out: list[Outcome] = []
    for doc in sorted(docs, key=lambda d: (_ORDER.get(_kind(d), 9), d.file or "", d.index or 0)):
        data: Any = doc.data
        meta = data.get("metadata") if isinstance(data, dict) else None
        ns = (
            meta.get("namespace") if isinstance(meta, dict) and meta.get("namespace") else namespace
        )
        try:
            out.append(Outcome(doc, plan=await api.apply(str(ns), data, dry_run=dry_run)))
        except ApiError as err:
            found = err.problem.problems or [
                Problem(code=err.problem.code, message=err.problem.detail)
            ]
            out.append(Outcome(doc, problems=list(found), code=err.problem.code))
    return out


def _line(o: Outcome, dry_run: bool) -> str:
    plan = o.plan
    assert plan is not None
    word = _WORDS.get(plan.action, plan.action)
    if dry_run and plan.action != "unchanged":
        word = f"would be {word}" if word != "changed" else "would change"
    version = f" (version {plan.version})" if plan.version and plan.action != "unchanged" else ""
    text = f"{word}: {plan.kind} {plan.namespace}/{plan.name}{version}"
    steps = plan.steps
    moved = [f"+{s}" for s in steps.added] + [f"-{s}" for s in steps.removed]
    moved += [f"~{s}" for s in steps.changed]
    if plan.action == "updated" and (moved or plan.changed_fields):
        detail = []
        if moved:
            detail.append("steps " + " ".join(moved))
        if plan.changed_fields:
            detail.append("fields " + ", ".join(plan.changed_fields))
        text += f"  [{'; '.join(detail)}]"
    return text


def _report(
    outcomes: list[Outcome], skipped: list[SourceDocument], fmt: Format, dry_run: bool
) -> None:
    text = listing.text_mode(fmt)
    counts: dict[str, int] = {}
    for o in outcomes:
        if o.plan is not None:
            key = _WORDS.get(o.plan.action, o.plan.action)
            counts[key] = counts.get(key, 0) + 1
            if text:
                typer.echo(_line(o, dry_run))
            else:
                where = {"file": o.doc.file, "document": o.doc.index}
                listing.emit_record("applied", {**where, **o.plan.model_dump(mode="json")}, fmt)
            continue
        counts["refused"] = counts.get("refused", 0) + 1
        typer.echo(f"error: {_where(o.doc)}: refused ({o.code})", err=True)
        print_problems(o.problems, _where(o.doc))
        if not text:
            for p in o.problems:
                at = p.model_dump(mode="json") | {"file": o.doc.file, "document": o.doc.index}
                listing.emit_record("problem", at, fmt)
    for doc in skipped:
        typer.echo(
            f"skipped: {_where(doc)}: a v1 Secret (kept by the cluster, never sent to the API)",
            err=True,
        )
    summary = ", ".join(f"{n} {w}" for w, n in sorted(counts.items())) or "nothing to apply"
    if text:
        typer.echo(f"{summary}{' (dry run: nothing was written)' if dry_run else ''}", err=True)
    else:
        listing.emit_record("summary", {"dry_run": dry_run, **counts}, fmt)


def command(
    files: Annotated[
        list[Path],
        typer.Option("--filename", "-f", help="A manifest file or a folder of them; repeat."),
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the server's plan; write nothing.")
    ] = False,
    url: UrlOption = None,
    token: TokenOption = None,
    profile: ProfileOption = None,
    namespace: NamespaceOption = None,
    output: FormatOption = Format.AUTO,
) -> None:
    """Apply manifests through a server's REST API (Pipelines and Schedules), or plan them."""
    docs, problems = read_paths(files)
    if problems:
        typer.echo("error: the manifests cannot be read; nothing was sent", err=True)
        for p in problems:
            typer.echo(f"  {p.render()}", err=True)
        raise typer.Exit(process.EXIT_USAGE)
    skipped = [d for d in docs if _is_secret(d)]
    sending = [d for d in docs if not _is_secret(d)]
    if not sending:
        process.fail(f"no manifests in {', '.join(map(str, files))}", process.EXIT_USAGE)
    remote = Remote(url, token, profile, namespace)
    outcomes = remote.run(lambda api: _send(api, remote.namespace, sending, dry_run))
    _report(outcomes, skipped, output, dry_run)
    if any(o.plan is None for o in outcomes):
        raise typer.Exit(EXIT_REFUSED)
