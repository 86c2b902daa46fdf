"""``dirigent run FILE --local``: apply a document in a throwaway instance, run it, watch it.

The output is the run: step transitions and log lines merged in the order they happened,
then — when a step failed — the diagnosis (step, block, error class, code, message), because
the instance is deleted on the way out and a failure not read out now is never read. The
exit code is the run's outcome: 0 succeeded, 0 with a warning for completed_with_errors
(1 with --strict), 1 failed or cancelled, 2 for a document or parameter that was refused.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from dirigent.engine import ProblemsError, RunRequest
from dirigent.engine.local import LocalInstance, local_instance
from dirigent.engine.logconfig import configure_logging
from dirigent.engine.manifests.loading import read_paths
from dirigent.engine.manifests.pipeline import Pipeline
from dirigent.engine.problems import Problem
from dirigent.engine.validation.documents import validate_documents
from dirigent.engine.views import RunDetail

TERMINAL = {"succeeded", "completed_with_errors", "failed", "cancelled"}
NAMESPACE = "default"


def _param(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise typer.BadParameter(f"{text!r}: write -p name=value")
    try:
        return key, json.loads(raw)
    except json.JSONDecodeError:
        return key, raw


def _problems(problems: list[Problem]) -> None:
    for p in problems:
        typer.echo(p.render(), err=True)


async def _watch(inst: LocalInstance, run_id: int) -> str:
    """Print step transitions and log lines merged by when they happened, until the run settles."""
    seen: dict[str, set[str]] = {}
    cursor: str | None = None
    engine = inst.engine
    while True:
        view = await engine.run(NAMESPACE, run_id)
        logs = await engine.logs(NAMESPACE, run_id, cursor=cursor)
        assert view is not None
        cursor = logs.next
        events = _step_events(view, seen)
        for line in logs.items:
            where = f"{line.step}: " if line.step else ""
            fields = " ".join(f"{k}={v}" for k, v in line.fields.items())
            settled = line.step is None and line.created_at == view.finished_at
            text = f"  {line.level:<7} {where}{line.message}" + (f"  {fields}" if fields else "")
            events.append((line.created_at, 3 if settled else 0, text))
        for _, _, text in sorted(events, key=lambda e: (e[0], e[1])):
            typer.echo(text)
        if view.status in TERMINAL:
            return view.status
        await asyncio.sleep(0.1)


def _step_events(view: RunDetail, seen: dict[str, set[str]]) -> list[tuple[datetime, int, str]]:
    events: list[tuple[datetime, int, str]] = []
    for step in view.steps:
        done = seen.setdefault(step.step, set())
        if step.started_at is not None and "running" not in done:
            done.add("running")
            events.append((step.started_at, 2, f"step {step.step}: running"))
        if step.status in TERMINAL | {"skipped"} and "end" not in done:
            done.add("end")
            succeeded = step.items_by_status.get("succeeded", 0)
            extra = f" ({succeeded}/{step.items} items)" if step.items is not None else ""
            at = step.finished_at or step.started_at or view.created_at
            events.append((at, 1, f"step {step.step}: {step.status}{extra}"))
    return events


async def _run(
    file: Path,
    pipeline: str | None,
    params: dict[str, Any],
    unsafe: list[str],
    keep: bool,
    root: Path | None,
) -> tuple[int, str]:
    docs, problems = read_paths([file])
    loaded, more = validate_documents(docs)
    if problems or more:
        _problems([*problems, *more])
        return 2, "refused"
    pipelines = [m.manifest for m in loaded if isinstance(m.manifest, Pipeline)]
    if pipeline is None:
        if len(pipelines) != 1:
            names = ", ".join(p.metadata.name for p in pipelines) or "none"
            typer.echo(
                f"error: {file} has {len(pipelines)} pipelines ({names}); choose one with --pipeline",
                err=True,
            )
            return 2, "refused"
        pipeline = pipelines[0].metadata.name
    async with local_instance(keep=keep, root=root, enabled_unsafe=unsafe) as inst:
        engine = inst.engine
        try:
            for item in loaded:
                if item.manifest.kind not in ("Pipeline", "Connection"):
                    typer.echo(
                        f"note: {item.manifest.kind} {item.manifest.metadata.name} is not used by a local run"
                    )
                    continue
                await engine.apply(item.manifest, NAMESPACE)
            created = await engine.start_run(
                RunRequest(NAMESPACE, pipeline, params, triggered_by_kind="cli")
            )
        except ProblemsError as err:
            _problems(err.problems)
            return 2, "refused"
        typer.echo(f"run {created.run_id} of {pipeline}: {created.status}")
        status = await _watch(inst, created.run_id)
        for f in await engine.failures(NAMESPACE, created.run_id):
            at_item = f" item {f.item_index}" if f.item_index is not None else ""
            typer.echo(
                f"failed: step {f.step}{at_item} (block {f.block}, attempt {f.number}): {f.error_message}\n"
                f"        error class {f.error_class}, code {f.error_code}",
                err=True,
            )
        if keep:
            typer.echo(f"kept: {inst.root}")
    return (0 if status in ("succeeded", "completed_with_errors") else 1), status


def command(
    file: Annotated[Path, typer.Argument(help="A manifest file (may hold several documents).")],
    local: Annotated[
        bool, typer.Option("--local", help="Run in a throwaway embedded instance.")
    ] = False,
    pipeline: Annotated[
        str | None, typer.Option(help="Which pipeline, when the file has several.")
    ] = None,
    param: Annotated[
        list[str] | None, typer.Option("-p", "--param", help="name=value (JSON or text).")
    ] = None,
    enable_unsafe: Annotated[
        list[str] | None, typer.Option(help="Allow one unsafe block for this run.")
    ] = None,
    keep: Annotated[bool, typer.Option(help="Keep the throwaway instance's files.")] = False,
    strict: Annotated[bool, typer.Option(help="Exit 1 on completed_with_errors.")] = False,
) -> None:
    """Run one pipeline and stream its progress; the exit code is the run's outcome."""
    if not local:
        typer.echo("error: only --local is available until the API lands; add --local", err=True)
        raise typer.Exit(2)
    configure_logging(level="WARNING")
    params = dict(_param(p) for p in param or [])
    code, status = asyncio.run(_run(file, pipeline, params, list(enable_unsafe or []), keep, None))
    typer.echo(f"run {status}")
    if status == "completed_with_errors":
        typer.echo("warning: the run completed with errors", err=True)
        code = 1 if strict else 0
    raise typer.Exit(code)
