"""``dirigent dev [DIR]``: the whole system in one process on an embedded PostgreSQL.

No cluster: the database lives in ``.dirigent/`` (kept between starts, migrated forward),
every manifest in DIR is applied and kept in step with the folder (``syncing``), a worker
and the scheduler run in-process, and the URL and a token are printed once as ``export`` lines a shell can
``eval``. The same folder works in a cluster: Secrets are ordinary ``v1`` Secret documents.

Output follows the terminal: readable lines on one, NDJSON records (``kind``: ``applied``,
``deactivated``, ``problem``, ``file``, ``token``, ``ready``) in a pipe. Progress for the
slow parts (starting the database, applying the folder) goes to stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets as random
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from dirigent.api.app import create_app
from dirigent.api.auth import StaticToken
from dirigent.api.server import ApiServer
from dirigent.cli import process
from dirigent.cli.devstate import DevState
from dirigent.cli.output import Output, OutputOption
from dirigent.cli.rendering import emit_json, is_json
from dirigent.cli.syncing import FolderSync
from dirigent.engine import EmbeddedPostgres, Engine, EngineSettings

Record = dict[str, Any]
HOST = "127.0.0.1"  # dev mode serves loopback only
MIN_TOKEN = 16  # what the API accepts as a static token
WATCH_INTERVAL = 0.3


class Printer:
    """Records to stdout: NDJSON, or a line each for a person."""

    def __init__(self, json_lines: bool) -> None:
        self.json = json_lines

    def __call__(self, record: Record) -> None:
        if self.json:
            emit_json(record)
            return
        kind = record["kind"]
        if kind == "applied":
            version = f" (version {record['version']})" if record.get("version") else ""
            text = f"{record['action']}: {record['manifest']} {record['name']}{version}"
        elif kind == "deactivated":
            text = f"deactivated: {record['manifest']} {record['name']} (history kept)"
        elif kind == "problem":
            text = "  " + _render_problem(record)
        elif kind == "file":
            text = f"{record['file']}: {record['status']}"
        elif kind == "kept":
            text = f"kept: the last good version of {record['manifest']} {record['name']} stays in force"
        elif kind == "token":
            text = f"minted a token for Webhook {record['webhook']}: {record['file']}"
        else:
            text = " ".join(f"{k}={v}" for k, v in record.items() if k != "kind")
        typer.echo(text, err=kind == "problem")


def _render_problem(r: Record) -> str:
    where = [x for x in (r.get("file"), r.get("location")) if x]
    if r.get("file") and r.get("document") is not None:
        where[0] = f"{r['file']}#{r['document']}"
    prefix = ": ".join(where)
    return f"{prefix}: {r['message']} [{r['code']}]" if prefix else f"{r['message']} [{r['code']}]"


def _progress(message: str) -> None:
    typer.echo(message, err=True)


async def _develop(
    folder: Path, state: DevState, port: int, token: str, printer: Printer, stop: asyncio.Event
) -> None:
    began = time.monotonic()
    _progress(f"starting the embedded PostgreSQL in {state.pgdata} ...")
    server = EmbeddedPostgres(state.pgdata)
    await asyncio.to_thread(server.start)
    try:
        migrated = await Engine.migrate(server.url)
        if migrated.changed:
            _progress(f"database migrated: {migrated.before or '(empty)'} -> {migrated.after}")
        settings = _settings(server.url, state)
        async with Engine.open(settings) as engine:
            await _serve(engine, folder, state, port, token, printer, stop, began)
    finally:
        await asyncio.to_thread(server.stop)


def _settings(url: str, state: DevState) -> EngineSettings:
    base = process.load_settings()
    overrides: dict[str, Any] = {
        "database_url": url,
        "artifact_root": state.artifacts,
        "poll_interval": 0.5,
    }
    if base.secret_key is None:
        overrides["secret_key"] = state.secret_key()
    if "metrics_port" not in base.model_fields_set:
        overrides["metrics_port"] = None  # several dev instances must not fight over a port
    return process.load_settings(**overrides)


async def _serve(
    engine: Engine,
    folder: Path,
    state: DevState,
    port: int,
    token: str,
    printer: Printer,
    stop: asyncio.Event,
    began: float,
) -> None:
    worker = engine.workers.build()
    scheduler = engine.triggers.scheduler()
    api = ApiServer(create_app(engine, auth=StaticToken(token)), host=HOST, port=port)
    working = [asyncio.create_task(worker.run()), asyncio.create_task(scheduler.run())]
    try:
        sync = FolderSync(engine, folder, state, printer)
        _progress(f"applying {folder} ...")
        count = await sync.sync()
        # The API answers once the folder is in force: a script that waits for it to answer
        # and then starts a run must find every pipeline of the folder.
        await api.start()
        _ready(printer, port, token, count, time.monotonic() - began)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), WATCH_INTERVAL)
            if not stop.is_set() and sync.changed():
                await sync.sync()
    finally:
        worker.stop()
        scheduler.stop()
        await asyncio.gather(*working)
        await api.stop()


def _ready(printer: Printer, port: int, token: str, count: int, took: float) -> None:
    url = f"http://{HOST}:{port}"
    export = f"export DIRIGENT_URL={url} DIRIGENT_TOKEN={token}"
    if printer.json:
        emit_json(
            {
                "kind": "ready",
                "url": url,
                "token": token,
                "manifests": count,
                "seconds": round(took, 3),
                "export": export,
            }
        )
    else:
        typer.echo(export)
    _progress(
        f"ready in {took:.1f}s: {count} manifests in force; watching for changes (Ctrl-C stops)"
    )


def command(
    folder: Annotated[
        Path, typer.Argument(help="The folder of manifests to apply and watch.", file_okay=False)
    ] = Path("."),
    port: Annotated[int, typer.Option(help="Port of the REST API on 127.0.0.1.")] = 8080,
    token: Annotated[
        str | None,
        typer.Option(envvar="DIRIGENT_DEV_TOKEN", help="The API token (random when unset)."),
    ] = None,
    state_dir: Annotated[
        Path, typer.Option("--state", help="Where the database and tokens are kept.")
    ] = Path(".dirigent"),
    wipe_state: Annotated[
        bool, typer.Option("--wipe-state", help="Start empty: remove what dev created in --state.")
    ] = False,
    output: OutputOption = Output.AUTO,
    log_format: process.LogFormatOption = process.LogFormat.AUTO,
) -> None:
    """Run dirigent on this machine: embedded PostgreSQL, a worker, the folder applied and watched."""
    if not folder.is_dir():
        process.fail(f"{folder}: no such folder", process.EXIT_USAGE)
    if token is not None and len(token) < MIN_TOKEN:
        process.fail(
            f"--token must be at least {MIN_TOKEN} characters (or leave it unset for a random one)",
            process.EXIT_USAGE,
        )
    state = DevState(state_dir)
    if wipe_state:
        removed = state.wipe()
        _progress(f"wiped {state.root}: {', '.join(removed) or 'nothing to remove'}")
    settings = process.load_settings()
    process.configure_logs(settings, log_format, level="WARNING")
    printer = Printer(is_json(output))
    chosen = token or random.token_urlsafe(24)
    process.serve(
        lambda _settings, stop: _develop(folder, state, port, chosen, printer, stop), settings
    )
