"""``dirigent run NAME``: start a run of a pipeline a server holds, and follow it if asked.

The server is found like every client command's (``--url``/``--token``, the environment, a
profile: ``remote``). Params are built exactly as for ``run FILE --local`` — typed against the
pipeline's own schema, here the schema of the version the server holds, so a bad value is
refused here with its location before anything is sent. Without ``--watch`` the command prints
the run's id and exits 0 once the server has created it; with ``--watch`` it follows the run
through the API (``runs.ApiRunSource``: a live step table on a terminal, NDJSON in a pipe) and
its exit code is the run's outcome, as with ``--local``: 0 succeeded, 0 with a warning for
completed_with_errors (1 with ``--strict``), 1 failed or cancelled, 2 refused (a bad
parameter, or a run the server would not start).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import typer

from dirigent.api.client import ApiError, Client
from dirigent.api.models import RunCreatedView
from dirigent.cli import replying
from dirigent.cli.backfill import params_for
from dirigent.cli.output import Output
from dirigent.cli.remote import Remote
from dirigent.cli.rendering import emit_json, is_json, run_renderer
from dirigent.cli.runs import ApiRunSource
from dirigent.cli.watching import follow
from dirigent.engine.shapes.views import RunDetail

__all__ = ["ServerRun", "start"]


@dataclass(frozen=True)
class ServerRun:
    """What ``run NAME`` was asked for."""

    name: str
    params_files: list[Path]
    params: list[str]
    watch: bool
    key: str | None
    output: Output


def start(remote: Remote, ask: ServerRun) -> tuple[int, str]:
    """The run's id and its status: its outcome when watched, else what the server said."""

    async def go(api: Client) -> tuple[int, str]:
        try:
            detail = await api.get_pipeline(remote.namespace, ask.name)
            values = params_for(detail, ask.params_files, ask.params)
            created = await api.run(remote.namespace, ask.name, values, idempotency_key=ask.key)
        except ApiError as err:
            if err.problem.status in (400, 404, 409, 422):  # not started: as --local, exit 2
                replying.fail(
                    f"{err.problem.code}: {err.problem.detail}",
                    replying.EXIT_USAGE,
                    err.problem.problems,
                )
            raise
        _announce(created, ask)
        if not ask.watch:
            return created.run_id, created.status
        final = await _follow(api, remote.namespace, created.run_id, ask.output)
        return created.run_id, final.status

    return remote.run(go)


def _announce(created: RunCreatedView, ask: ServerRun) -> None:
    earlier = "" if created.created else " (an earlier run with this key)"
    if is_json(ask.output):
        if not ask.watch:
            emit_json({"kind": "run", "pipeline": ask.name, **created.model_dump(mode="json")})
        return
    typer.echo(f"run {created.run_id} of {ask.name}: {created.status}{earlier}")
    if not ask.watch:
        typer.echo(f"follow it with `dirigent runs show {created.run_id} --watch`", err=True)


async def _follow(api: Client, namespace: str, run_id: int, output: Output) -> RunDetail:
    with run_renderer(output) as renderer:
        return await follow(ApiRunSource(api, namespace, run_id), renderer.record)
