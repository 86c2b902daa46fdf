"""``dirigent run FILE --local``: apply a document in a throwaway instance, run it, follow it.

(``dirigent run NAME`` without ``--local`` starts a run on a server instead: ``serverrun``.)

The output is the run: step transitions and log lines merged in the order they happened (a
live step table on a terminal, NDJSON in a pipe), then — when a step failed — the diagnosis
(step, block, error class, code, message), because the instance is deleted on the way out
and a failure not read out now is never read. Secrets for the file's Connections come from
``v1`` Secret documents in the same file or in ``--secrets FILE``. The exit code is the run's
outcome: 0 succeeded, 0 with a warning for completed_with_errors (1 with ``--strict``), 1
failed or cancelled, 2 for a document, a parameter or a flag that was refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from dirigent.cli import process, replying, serverrun
from dirigent.cli.documents import Documents, read_documents
from dirigent.cli.output import Output, OutputOption
from dirigent.cli.params import build_params
from dirigent.cli.remote import NamespaceOption, ProfileOption, Remote, TokenOption, UrlOption
from dirigent.cli.rendering import emit_json, is_json, run_renderer
from dirigent.cli.watching import EngineRunSource, follow
from dirigent.engine import (
    EmbeddedPostgresError,
    LocalInstance,
    ProblemsError,
    RunRequest,
    configure_logging,
    local_instance,
)
from dirigent.engine.shapes.manifests.pipeline import Pipeline
from dirigent.engine.shapes.problems import Problem

NAMESPACE = "default"
LOCAL_KINDS = ("Pipeline", "Connection")


class Refused(Exception):
    """The run was not started: problems already printed; exit 2."""


def _problems(problems: list[Problem]) -> None:
    replying.print_problems(problems)


def _choose(docs: Documents, file: Path, pipeline: str | None) -> Pipeline:
    pipelines = [m.manifest for m in docs.manifests if isinstance(m.manifest, Pipeline)]
    if pipeline is not None:
        for p in pipelines:
            if p.metadata.name == pipeline:
                return p
    elif len(pipelines) == 1:
        return pipelines[0]
    names = ", ".join(p.metadata.name for p in pipelines) or "none"
    what = f"no pipeline {pipeline!r}" if pipeline else f"{len(pipelines)} pipelines"
    hint = "; choose one with --pipeline" if len(pipelines) > 1 else ""
    typer.echo(f"error: {file} has {what} (it has: {names}){hint}", err=True)
    raise Refused


async def _apply_all(inst: LocalInstance, docs: Documents) -> None:
    problems: list[Problem] = []
    for item in docs.manifests:
        m = item.manifest
        if m.kind not in LOCAL_KINDS:
            typer.echo(f"note: {m.kind} {m.metadata.name} is not used by a local run", err=True)
            continue
        values, missing = docs.secrets.resolve(m, m.metadata.namespace or NAMESPACE)
        if missing:
            problems += [p.at(file=item.source.file, document=item.source.index) for p in missing]
            continue
        try:
            await inst.engine.manifests.apply(m, NAMESPACE, secret_values=values or None)
        except ProblemsError as err:
            problems += [
                p.at(file=item.source.file, document=item.source.index) for p in err.problems
            ]
    if problems:
        _problems(problems)
        raise Refused


async def _run_local(
    docs: Documents,
    pipeline: Pipeline,
    params: dict[str, Any],
    window: tuple[datetime, datetime] | None,
    output: Output,
    unsafe: list[str],
    keep: bool,
) -> tuple[int, str]:
    async with local_instance(keep=keep, enabled_unsafe=unsafe) as inst:
        await _apply_all(inst, docs)
        name = pipeline.metadata.name
        try:
            created = await inst.engine.runs.start(
                RunRequest(NAMESPACE, name, params, triggered_by_kind="cli", window=window)
            )
        except ProblemsError as err:
            _problems(err.problems)
            raise Refused from None
        if not is_json(output):
            typer.echo(f"run {created.run_id} of {name}: {created.status}")
        with run_renderer(output) as renderer:
            detail = await follow(
                EngineRunSource(inst.engine, NAMESPACE, created.run_id), renderer.record
            )
        if keep:
            typer.echo(f"kept: {inst.root}", err=True)
        return created.run_id, detail.status


def parse_window(text: str) -> tuple[datetime, datetime]:
    """``START..END`` (ISO dates or times; UTC unless an offset is given) as a data window."""
    start, sep, end = text.partition("..")
    try:
        if not sep:
            raise ValueError
        bounds = [datetime.fromisoformat(x.strip()) for x in (start, end)]
    except ValueError:
        raise typer.BadParameter(
            f"{text!r}: write START..END, e.g. 2025-01-01..2025-01-02 or 2025-01-01T05:00Z..2025-01-02T05:00Z"
        ) from None
    first, last = (b if b.tzinfo else b.replace(tzinfo=UTC) for b in bounds)
    if last <= first:
        raise typer.BadParameter(f"{text!r}: the window ends before it starts")
    return first, last


def exit_code(status: str, strict: bool) -> int:
    """The run's outcome as an exit code (the same for a local run and a server's)."""
    if status == "succeeded":
        return 0
    if status == "completed_with_errors":
        typer.echo("warning: the run completed with errors", err=True)
        return 1 if strict else 0
    return 1


def command(
    target: Annotated[
        str,
        typer.Argument(
            help="With --local, a manifest file (may hold Secrets too); else a pipeline's name "
            "on the server.",
            show_default=False,
        ),
    ],
    local: Annotated[
        bool, typer.Option("--local", help="Run in a throwaway embedded instance.")
    ] = False,
    pipeline: Annotated[
        str | None, typer.Option(help="Which pipeline, when the file has several.")
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option("-p", "--param", help="path=value, typed by the params schema; repeat."),
    ] = None,
    params_file: Annotated[
        list[Path] | None,
        typer.Option("-P", "--params-file", help="A YAML/JSON file of params; repeat."),
    ] = None,
    secrets: Annotated[
        list[Path] | None,
        typer.Option("--secrets", help="A file of v1 Secret documents for secretKeyRefs."),
    ] = None,
    window: Annotated[
        str | None,
        typer.Option(help="The run's data window, START..END (what ${run.window.*} reads)."),
    ] = None,
    output: OutputOption = Output.AUTO,
    enable_unsafe: Annotated[
        list[str] | None, typer.Option(help="Allow one unsafe block for this run.")
    ] = None,
    keep: Annotated[bool, typer.Option(help="Keep the throwaway instance's files.")] = False,
    strict: Annotated[bool, typer.Option(help="Exit 1 on completed_with_errors.")] = False,
    watch: Annotated[
        bool,
        typer.Option("--watch", "-w", help="On a server: follow the run; exit with its outcome."),
    ] = False,
    key: Annotated[
        str | None, typer.Option(help="On a server: an idempotency key (one run per key).")
    ] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    profile: ProfileOption = None,
    namespace: NamespaceOption = None,
) -> None:
    """Run one pipeline (a file --local, or a name on a server); the exit code is its outcome."""
    if not local:
        local_only = {
            "--pipeline": pipeline,
            "--secrets": secrets,
            "--window": window,
            "--enable-unsafe": enable_unsafe,
            "--keep": keep,
        }
        _on_server(
            target,
            [flag for flag, value in local_only.items() if value],
            serverrun.ServerRun(target, params_file or [], param or [], watch, key, output),
            lambda: Remote(url, token, profile, namespace),
            strict,
        )
    _run_file(
        Path(target),
        pipeline,
        param,
        params_file,
        secrets,
        window,
        output,
        enable_unsafe,
        keep,
        strict,
    )


def _on_server(
    target: str,
    local_only: list[str],
    ask: serverrun.ServerRun,
    remote: Callable[[], Remote],
    strict: bool,
) -> NoReturn:
    """``run NAME`` without --local; the server is looked for only once the flags make sense."""
    if local_only:
        replying.fail(f"{', '.join(local_only)} only work with --local", replying.EXIT_USAGE)
    if Path(target).is_file():
        replying.fail(
            f"{target} is a file: run it with --local, or apply it (`dirigent apply -f {target}`) "
            "and run the pipeline by name",
            replying.EXIT_USAGE,
        )
    run_id, status = serverrun.start(remote(), ask)
    if not ask.watch:
        raise typer.Exit(0)
    _finish(ask.output, ask.name, status, exit_code(status, strict), run_id)


def _run_file(
    target: Path,
    pipeline: str | None,
    param: list[str] | None,
    params_file: list[Path] | None,
    secrets: list[Path] | None,
    window: str | None,
    output: Output,
    enable_unsafe: list[str] | None,
    keep: bool,
    strict: bool,
) -> NoReturn:
    configure_logging(level="WARNING")
    span = parse_window(window) if window else None
    docs = read_documents([target], secrets or [])
    if docs.problems:
        _problems(docs.problems)
        _finish(output, None, "refused", replying.EXIT_USAGE)
    try:
        chosen = _choose(docs, target, pipeline)
        values = build_params(chosen.spec.params, params_file or [], param or [])
    except ProblemsError as err:
        _problems(err.problems)
        _finish(output, None, "refused", replying.EXIT_USAGE)
    except Refused:
        _finish(output, None, "refused", replying.EXIT_USAGE)
    try:
        run_id, status = asyncio.run(
            _run_local(docs, chosen, values, span, output, list(enable_unsafe or []), keep)
        )
    except Refused:
        _finish(output, chosen.metadata.name, "refused", replying.EXIT_USAGE)
    except EmbeddedPostgresError as err:
        process.fail(f"the embedded PostgreSQL did not start: {str(err).splitlines()[0]}")
    _finish(output, chosen.metadata.name, status, exit_code(status, strict), run_id)


def _finish(
    output: Output, pipeline: str | None, status: str, code: int, run_id: int | None = None
) -> NoReturn:
    if is_json(output):
        record = {"kind": "result", "run": run_id, "pipeline": pipeline, "status": status}
        emit_json({**record, "exit": code})
    else:
        typer.echo(f"run {status}")
    raise typer.Exit(code)
