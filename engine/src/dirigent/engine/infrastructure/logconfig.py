"""Process logging: one structlog chain, JSON in a container, readable on a terminal.

Only process entry points call ``configure_logging``; no library module configures logging
at import time. Standard-library records (uvicorn, asyncpg, kopf) go through the same
renderer, so every line of a process looks alike.

Tracebacks are kept and locals never shown: JSON lines carry the traceback as one string
field (``exception``), the console prints it plainly. A rendered frame's local variables
would print whatever a block held — an opened connection's token included — so no format
renders them (structlog's console default does, through rich, when rich is installed).
"""

from __future__ import annotations

import logging
import sys
from typing import Literal

import structlog


def configure_logging(fmt: Literal["console", "json"] = "console", level: str = "INFO") -> None:
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(
            colors=False, exception_formatter=structlog.dev.plain_traceback
        )
    )
    # JSON has no exception formatter of its own: without this, ``exc_info`` is dropped.
    tracebacks: list[structlog.types.Processor] = (
        [structlog.processors.format_exc_info] if fmt == "json" else []
    )
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                *tracebacks,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
