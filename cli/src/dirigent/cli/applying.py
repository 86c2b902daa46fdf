"""``dirigent apply -f FILE|DIR``: manifests sent to a server's REST apply, or planned there.

Every document of every file is sent on its own to ``POST …/pipelines/$apply`` — the same
validation as the operator and ``dirigent dev`` — in the order a document's references need:
Connections, then Pipelines (they name connections; one after the pipelines it requires),
then Schedules and Webhooks (they name pipelines). ``--dry-run`` asks the server for the
plan instead and writes nothing: per document *created*, *changed* (with the steps added,
removed and changed and the other fields that moved) or *unchanged*, and the problems of a document the server refuses, located as
``file#document: location``.

Secrets, as ``dirigent dev`` reads them: a Connection's ``secretKeyRef``s and a Webhook's
``hmacSecretRef`` are resolved from the ``v1`` Secret documents among the files (``stringData``
or base64 ``data``) and sent with the document as its ``secretValues`` — the same folder works
with ``kubectl apply``, ``dirigent dev`` and here. The Secret documents themselves are not
applied (the API keeps no Secrets; it seals the values it is given). A Webhook's token is the
``token`` key of a Secret ``<webhook>-token`` among the files (the one the operator would mint
in a cluster); without one, a Webhook new to the server gets a token minted here, written to
``.dirigent/secrets/<namespace>.<webhook>-token`` (owner-only, like ``dirigent dev``'s), and
a Webhook the server already has keeps its token.

Exit 0 when every document was applied (or would be), 1 when the server refused any, 2 when
a file cannot be read or parsed.
"""

from __future__ import annotations

import os
import secrets as random
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer

from dirigent.api.client import ApiError, Client
from dirigent.api.models import ApplyPlan
from dirigent.cli import replying
from dirigent.cli.output import Output, OutputOption, text_mode
from dirigent.cli.remote import NamespaceOption, ProfileOption, Remote, TokenOption, UrlOption
from dirigent.cli.replying import EXIT_FAILED, EXIT_USAGE
from dirigent.cli.secrets import SecretStore, split_secrets
from dirigent.engine.shapes.manifests.loading import SourceDocument, parse_manifest, read_paths
from dirigent.engine.shapes.manifests.ordering import apply_order, facts_of
from dirigent.engine.shapes.manifests.webhook import Webhook
from dirigent.engine.shapes.problems import Problem

_WORDS = {"created": "created", "updated": "changed", "activated": "activated"}


TOKENS = Path(".dirigent") / "secrets"  # minted webhook tokens, where dev keeps its own


@dataclass
class DocumentApplied:
    doc: SourceDocument
    plan: ApplyPlan | None = None
    problems: list[Problem] = field(default_factory=list)
    code: str = ""
    minted: Path | None = None


def _kind(doc: SourceDocument) -> str:
    return str(doc.data.get("kind", "")) if isinstance(doc.data, dict) else ""


def _where(doc: SourceDocument) -> str:
    return f"{doc.file}#{doc.index}" if doc.index is not None else str(doc.file)


async def _send(
    api: Client, namespace: str, docs: list[SourceDocument], store: SecretStore, dry_run: bool
) -> list[DocumentApplied]:
    out: list[DocumentApplied] = []
    for doc in apply_order(
        docs, lambda d: facts_of(d.data), lambda d: (d.file or "", d.index or 0)
    ):
        data: Any = doc.data
        meta = data.get("metadata") if isinstance(data, dict) else None
        ns = str(
            meta.get("namespace") if isinstance(meta, dict) and meta.get("namespace") else namespace
        )
        values, missing, minted = await _secret_values(api, ns, doc, store, dry_run)
        if missing:
            out.append(DocumentApplied(doc, problems=missing, code="secret.not_found"))
            continue
        body = data if values is None else {**data, "secretValues": values}
        try:
            plan = await api.apply(ns, body, dry_run=dry_run)
        except ApiError as err:
            found = err.problem.problems or [
                Problem(code=err.problem.code, message=err.problem.detail)
            ]
            out.append(DocumentApplied(doc, problems=list(found), code=err.problem.code))
            continue
        out.append(DocumentApplied(doc, plan=plan, minted=minted() if minted else None))
    return out


async def _secret_values(
    api: Client, namespace: str, doc: SourceDocument, store: SecretStore, dry_run: bool
) -> tuple[dict[str, str] | None, list[Problem], Any]:
    """A Connection's or Webhook's ``secretValues``, the refs not found, and (for a new
    Webhook) how to keep the token minted for it once the server took it."""
    if _kind(doc) not in ("Connection", "Webhook"):
        return None, [], None
    manifest, _ = parse_manifest(doc.data)
    if manifest is None:
        return None, [], None  # the server reports what is wrong with it, located
    values, missing = store.resolve(manifest, namespace)
    if missing or not isinstance(manifest, Webhook):
        return values, missing, None
    name = manifest.metadata.name
    held = store.values.get((namespace, f"{name}-token"), {}).get("token")
    if held is not None:
        return {**values, "token": held}, [], None
    try:
        await api.get_webhook(namespace, name)
        return values, [], None  # the server has it: its token stays
    except ApiError as err:
        if err.problem.status != 404:
            raise
    kept = TOKENS / f"{namespace}.{name}-token"
    if kept.exists() or dry_run:  # a token dev minted for this folder, or one for the plan
        token = kept.read_text(encoding="utf-8").strip() if kept.exists() else _mint()
        return {**values, "token": token}, [], None
    token = _mint()
    return {**values, "token": token}, [], lambda: _keep(kept, token)


def _mint() -> str:
    return random.token_urlsafe(32)


def _keep(path: Path, token: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(token + "\n")
    return path


def _line(o: DocumentApplied, dry_run: bool) -> str:
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


def _report(outcomes: list[DocumentApplied], secrets: int, fmt: Output, dry_run: bool) -> None:
    text = text_mode(fmt)
    counts: dict[str, int] = {}
    for o in outcomes:
        where = {"file": o.doc.file, "document": o.doc.index}
        if o.plan is not None:
            key = _WORDS.get(o.plan.action, o.plan.action)
            counts[key] = counts.get(key, 0) + 1
            replying.reply(
                "applied",
                {**where, **o.plan.model_dump(mode="json")},
                fmt,
                partial(_line, o, dry_run),
            )
            if o.minted is not None:
                _minted(o, fmt)
            continue
        counts["refused"] = counts.get("refused", 0) + 1
        typer.echo(f"error: {_where(o.doc)}: refused ({o.code})", err=True)
        replying.print_problems(o.problems, _where(o.doc))
        if not text:
            for p in o.problems:
                replying.emit_record("problem", p.model_dump(mode="json") | where, fmt)
    if secrets and text:
        typer.echo(f"{secrets} Secret document(s) read for secretKeyRefs (not applied)", err=True)
    summary = ", ".join(f"{n} {w}" for w, n in sorted(counts.items())) or "nothing to apply"
    if text:
        typer.echo(f"{summary}{' (dry run: nothing was written)' if dry_run else ''}", err=True)
    else:
        replying.emit_record("summary", {"dry_run": dry_run, **counts}, fmt)


def _minted(o: DocumentApplied, fmt: Output) -> None:
    assert o.plan is not None
    name = f"{o.plan.namespace}/{o.plan.name}"
    if text_mode(fmt):
        typer.echo(f"minted a token for Webhook {name}: {o.minted} (POST /hooks/<token>)", err=True)
    else:
        replying.emit_record("token", {"webhook": name, "file": str(o.minted)}, fmt)


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
    output: OutputOption = Output.AUTO,
) -> None:
    """Apply manifests through a server's REST API (every kind; Secrets resolve refs), or plan."""
    docs, problems = read_paths(files)
    sending, store, bad = split_secrets(docs)
    if problems or bad:
        replying.fail("the manifests cannot be read; nothing was sent", EXIT_USAGE, problems + bad)
    if not sending:
        replying.fail(f"no manifests in {', '.join(map(str, files))}", EXIT_USAGE)
    remote = Remote(url, token, profile, namespace)
    outcomes = remote.run(lambda api: _send(api, remote.namespace, sending, store, dry_run))
    _report(outcomes, len(docs) - len(sending), output, dry_run)
    if any(o.plan is None for o in outcomes):
        raise typer.Exit(EXIT_FAILED)
