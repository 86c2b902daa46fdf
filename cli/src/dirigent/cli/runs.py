"""``dirigent runs list | show | logs | cancel | retry``: a server's runs, over the REST API.

``show --watch`` follows the run to its end through the same ``watching.follow`` that
``run --local`` uses (a live step table on a terminal, NDJSON in a pipe); its exit code is
the run's outcome like ``run``'s. ``logs --follow`` streams lines until the run finishes.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Annotated

import typer
from rich.console import Group
from rich.text import Text

from dirigent.api.client import Client
from dirigent.api.models import FailureView, LogView, Page, RunDetail, RunSummary
from dirigent.cli import listing, replying
from dirigent.cli.output import Output, OutputOption, text_mode
from dirigent.cli.remote import NamespaceOption, ProfileOption, Remote, TokenOption, UrlOption
from dirigent.cli.rendering import run_renderer
from dirigent.cli.replying import EXIT_FAILED
from dirigent.cli.watching import follow
from dirigent.engine.shapes.views import EngineEvent

app = typer.Typer(
    no_args_is_help=True, help="The runs on a server: list, show, logs, cancel, retry."
)

RunArg = Annotated[int, typer.Argument(help="The run's id.", min=1)]
COLUMNS: list[listing.Column] = [
    ("id", lambda r: str(r.id)),
    ("pipeline", lambda r: f"{r.pipeline} v{r.version}"),
    ("status", lambda r: listing.styled(r.status)),
    ("trigger", lambda r: r.triggered_by_kind),
    ("created", lambda r: listing.ago(r.created_at)),
    ("took", lambda r: listing.seconds(r.started_at, r.finished_at)),
    ("failed step", lambda r: r.failed_step or ""),
]
STEP_COLUMNS: list[listing.Column] = [
    ("step", lambda s: s.step),
    ("block", lambda s: s.block),
    ("status", lambda s: listing.styled(s.status)),
    (
        "items",
        lambda s: (
            f"{s.items_by_status.get('succeeded', 0)}/{s.items}" if s.items is not None else ""
        ),
    ),
    ("attempts", lambda s: str(s.attempts)),
    ("took", lambda s: f"{s.duration_seconds:.2f}s" if s.duration_seconds is not None else ""),
]


@app.command("list")
def list_runs(
    pipeline: Annotated[
        str | None, typer.Option("--pipeline", "-p", help="Only this pipeline's runs.")
    ] = None,
    status: Annotated[str | None, typer.Option(help="Only runs in this status.")] = None,
    trigger: Annotated[
        str | None, typer.Option(help="Only runs started this way (api, schedule, backfill, ...).")
    ] = None,
    limit: Annotated[
        int, typer.Option(help="At most this many (newest first).", min=1, max=500)
    ] = 20,
    url: UrlOption = None,
    token: TokenOption = None,
    profile: ProfileOption = None,
    namespace: NamespaceOption = None,
    output: OutputOption = Output.AUTO,
) -> None:
    """Runs, newest first."""
    remote = Remote(url, token, profile, namespace)

    async def read(api: Client) -> Page[RunSummary]:
        return await api.list_runs(
            remote.namespace, pipeline=pipeline, status=status, trigger=trigger, limit=limit
        )

    page = remote.run(read)
    replying.emit("run", page.items, output, COLUMNS)


@app.command("show")
def show(
    run_id: RunArg,
    watch: Annotated[
        bool, typer.Option("--watch", "-w", help="Follow the run to its end.")
    ] = False,
    url: UrlOption = None,
    token: TokenOption = None,
    profile: ProfileOption = None,
    namespace: NamespaceOption = None,
    output: OutputOption = Output.AUTO,
) -> None:
    """A run and its steps (with --watch, followed live; the exit code is then its outcome)."""
    remote = Remote(url, token, profile, namespace)
    if watch:
        _watch(remote, run_id, output)
        return

    async def read(api: Client) -> tuple[RunDetail, list[FailureView]]:
        detail = await api.get_run(remote.namespace, run_id)
        failures = await api.failures(remote.namespace, run_id) if detail.status == "failed" else []
        return detail, failures

    detail, failures = remote.run(read)
    replying.reply("run", detail, output, lambda: _rendered(detail, failures))
    if not text_mode(output):
        for f in failures:
            replying.emit_record("failure", f, output)


def _rendered(detail: RunDetail, failures: list[FailureView]) -> Group:
    head = Text(f"run {detail.id} of {detail.pipeline} (version {detail.version}): ")
    head.append(detail.status, style=listing.STYLE.get(detail.status, "bold"))
    facts = [
        f"started by {detail.triggered_by_kind}"
        + (f" ({detail.triggered_by_ref})" if detail.triggered_by_ref else ""),
        f"created {listing.ago(detail.created_at)}",
    ]
    took = listing.seconds(detail.started_at, detail.finished_at)
    if took:
        facts.append(f"took {took}")
    if detail.window_start and detail.window_end:
        facts.append(f"window {detail.window_start.isoformat()} .. {detail.window_end.isoformat()}")
    parts: list[Text | object] = [head, Text("; ".join(facts), style="dim")]
    if detail.params:
        parts.append(Text(f"params {detail.params}", style="dim"))
    parts.append(listing.table(STEP_COLUMNS, detail.steps))
    for f in failures:
        at = f" item {f.item_index}" if f.item_index is not None else ""
        parts.append(
            Text(
                f"failed: step {f.step}{at} (block {f.block}, attempt {f.number}): "
                f"{f.error_message} [{f.error_class}/{f.error_code}]",
                style="red",
            )
        )
    return Group(*parts)  # type: ignore[arg-type]


class ApiRunSource:
    """A run followed over the API (``watching.RunSource``): ``$events`` for transitions."""

    def __init__(self, api: Client, namespace: str, run_id: int) -> None:
        self.api, self.namespace, self.run_id = api, namespace, run_id

    async def events(self) -> AsyncIterator[EngineEvent]:
        async for event in self.api.watch(self.namespace, self.run_id):
            if event.event in ("run", "step", "attempt"):
                yield EngineEvent.model_validate(event.data)

    async def detail(self) -> RunDetail | None:
        return await self.api.get_run(self.namespace, self.run_id)

    async def logs(self, cursor: str | None) -> Page[LogView]:
        return await self.api.logs(self.namespace, self.run_id, limit=500, after=cursor)

    async def failures(self) -> list[FailureView]:
        return await self.api.failures(self.namespace, self.run_id)


def _watch(remote: Remote, run_id: int, output: Output) -> None:
    chosen = Output.TEXT if text_mode(output) else Output.JSON

    async def go(api: Client) -> RunDetail:
        with run_renderer(chosen) as renderer:
            return await follow(ApiRunSource(api, remote.namespace, run_id), renderer.record)

    final = remote.run(go)
    raise typer.Exit(outcome_code(final.status))


def outcome_code(status: str) -> int:
    """0 succeeded (completed_with_errors warns), 1 any other end."""
    if status == "completed_with_errors":
        typer.echo("warning: the run completed with errors", err=True)
    return 0 if status in ("succeeded", "completed_with_errors") else EXIT_FAILED


@app.command("logs")
def logs(
    run_id: RunArg,
    follow_: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing lines until the run ends.")
    ] = False,
    url: UrlOption = None,
    token: TokenOption = None,
    profile: ProfileOption = None,
    namespace: NamespaceOption = None,
    output: OutputOption = Output.AUTO,
) -> None:
    """A run's log lines, oldest first (with --follow, as they are written)."""
    remote = Remote(url, token, profile, namespace)
    text = text_mode(output)

    def emit(line: LogView) -> None:
        if text:
            _print_log(line)
        else:
            replying.emit_record("log", line, output)

    async def read(api: Client) -> str | None:
        cursor: str | None = None
        while True:  # every line written so far; ``next`` is always set (for following)
            page = await api.logs(remote.namespace, run_id, limit=500, after=cursor)
            for line in page.items:
                emit(line)
            cursor = page.next
            if len(page.items) < 500:
                break
        if not follow_:
            return None
        return await _follow_logs(api, remote.namespace, run_id, cursor, emit)

    status = remote.run(read)
    if status is not None and not text:
        replying.emit_record("end", {"run": run_id, "status": status}, output)


async def _follow_logs(
    api: Client, namespace: str, run_id: int, cursor: str | None, emit: Callable[[LogView], None]
) -> str:
    """Lines after ``cursor`` until the server says the run ended; its final status."""
    while True:
        events = api.follow_logs(namespace, run_id, after=cursor)
        try:
            async for event in events:
                cursor = event.id or cursor
                if event.event == "log":
                    emit(LogView.model_validate(event.data))
                elif event.event == "end":
                    return str(event.data.get("status"))
        finally:  # closed in this loop when ``end`` returns from inside it, not at exit
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()
        # ``expired`` or a closed stream: reopen after the last line seen


def _print_log(line: LogView) -> None:
    when = line.created_at.astimezone().strftime("%H:%M:%S")
    text = Text(f"{when} {line.level:<7} ", style="dim")
    text.append(f"{line.step + ': ' if line.step else ''}{line.message}")
    if line.fields:
        text.append("  " + " ".join(f"{k}={v}" for k, v in line.fields.items()), style="dim")
    replying.console().print(text)


@app.command("cancel")
def cancel(
    run_id: RunArg,
    reason: Annotated[str | None, typer.Option(help="Why; kept with the run.")] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    profile: ProfileOption = None,
    namespace: NamespaceOption = None,
    output: OutputOption = Output.AUTO,
) -> None:
    """Cancel a run: its queued work is dropped, running attempts are told to stop."""
    remote = Remote(url, token, profile, namespace)
    receipt = remote.run(
        lambda api: api.cancel(
            remote.namespace, run_id, reason or "cancelled with dirigent runs cancel"
        )
    )
    told = f"; {receipt.remotes_told} remote job(s) told to stop" if receipt.remotes_told else ""
    replying.reply(
        "cancel", receipt, output, lambda: f"run {receipt.run_id}: {receipt.status}{told}"
    )


@app.command("retry")
def retry(
    run_id: RunArg,
    step: Annotated[
        str, typer.Argument(help="The failed step to run again (only its failed items).")
    ],
    key: Annotated[
        str | None,
        typer.Option(help="Idempotency key: the same key never retries twice (random when unset)."),
    ] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    profile: ProfileOption = None,
    namespace: NamespaceOption = None,
    output: OutputOption = Output.AUTO,
) -> None:
    """Retry a failed step of a run once more; upstream steps do not run again."""
    remote = Remote(url, token, profile, namespace)
    chosen = key or uuid.uuid4().hex
    receipt = remote.run(
        lambda api: api.retry(remote.namespace, run_id, step, idempotency_key=chosen)
    )
    again = "" if receipt.created else " (already retried with this key)"
    replying.reply(
        "retry",
        receipt,
        output,
        lambda: (
            f"run {receipt.run_id}: step {receipt.step} retried{again}: "
            f"{len(receipt.attempt_ids)} attempt(s); follow with `dirigent runs show {run_id} --watch`"
        ),
    )
