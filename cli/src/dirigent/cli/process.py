"""What every long-running ``dirigent`` process shares: settings, logs, signals, one-line errors.

``worker``, ``migrate``, ``dev`` — and ``api``, ``operator`` and ``scheduler`` as they land —
start the same way, so they start through here:

- settings come from ``EngineSettings`` (environment) with the command's flags laid over it,
  built once; a bad value is one line naming the variable, exit 2;
- logs are structlog, JSON when asked (``--log-format json`` or ``DIRIGENT_LOG_FORMAT``) or
  when stderr is not a terminal (a container), readable otherwise;
- SIGTERM and SIGINT set one ``stop`` event the service waits on, so shutdown is graceful
  (a worker hands back what it holds) and a second signal is not needed;
- a database that is unreachable or not migrated (``EngineUnavailable``) is one line and
  exit 1, never a traceback.

A service is ``async def main(settings, stop) -> None``; ``serve`` runs it.
"""

from __future__ import annotations

import asyncio
import enum
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, NoReturn

import structlog
import typer
from pydantic import ValidationError

from dirigent.engine import (
    EmbeddedPostgresError,
    EngineSettings,
    configure_logging,
    pooler_warning,
)
from dirigent.engine.shapes.problems import EngineUnavailable

__all__ = [
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "LogFormat",
    "LogFormatOption",
    "Service",
    "configure_logs",
    "fail",
    "load_settings",
    "serve",
]

EXIT_FAILURE = 1
EXIT_USAGE = 2


class LogFormat(enum.StrEnum):
    AUTO = "auto"
    CONSOLE = "console"
    JSON = "json"


LogFormatOption = Annotated[
    LogFormat,
    typer.Option(
        "--log-format",
        help="console for people, json for collectors; auto: json unless stderr is a terminal "
        "(DIRIGENT_LOG_FORMAT).",
    ),
]

Service = Callable[[EngineSettings, asyncio.Event], Awaitable[None]]


def fail(message: str, code: int = EXIT_FAILURE) -> NoReturn:
    """Print one ``error:`` line on stderr and exit with ``code``."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def load_settings(**flags: Any) -> EngineSettings:
    """``EngineSettings`` from the environment with the flags given (not None) laid over it."""
    overrides = {k: v for k, v in flags.items() if v is not None}
    try:
        return EngineSettings(**overrides)
    except ValidationError as err:
        for e in err.errors(include_url=False):
            name = "DIRIGENT_" + "_".join(str(p) for p in e["loc"]).upper() if e["loc"] else ""
            message = str(e["msg"]).removeprefix("Value error, ")
            typer.echo(f"error: invalid setting {name or '(settings)'}: {message}", err=True)
        raise typer.Exit(EXIT_USAGE) from None


def configure_logs(
    settings: EngineSettings, fmt: LogFormat = LogFormat.AUTO, level: str = "INFO"
) -> None:
    """The flag wins, then ``DIRIGENT_LOG_FORMAT``, then JSON unless stderr is a terminal."""
    if fmt is LogFormat.AUTO:
        if "log_format" in settings.model_fields_set:
            chosen = settings.log_format
        else:
            chosen = "console" if sys.stderr.isatty() else "json"
    else:
        chosen = "json" if fmt is LogFormat.JSON else "console"
    configure_logging(chosen, level=level)


def serve(service: Service, settings: EngineSettings) -> None:
    """Run ``service`` until it returns or a SIGTERM/SIGINT asks it to stop; one-line errors."""
    warning = pooler_warning(settings)
    if warning is not None:
        structlog.get_logger("dirigent.process").warning("database.pooler", message=warning)
    try:
        asyncio.run(_until_signalled(service, settings))
    except EngineUnavailable as err:
        fail(str(err))
    except EmbeddedPostgresError as err:
        first, *detail = str(err).strip().splitlines()
        for line in detail:  # the server's own words: what initdb or postgres said
            typer.echo(f"  {line}", err=True)
        fail(first)
    except KeyboardInterrupt:  # a signal before the handlers were installed
        raise typer.Exit(130) from None


async def _until_signalled(service: Service, settings: EngineSettings) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await service(settings, stop)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
