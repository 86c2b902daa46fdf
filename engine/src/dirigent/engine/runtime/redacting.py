"""Secrets never leave an attempt: what it reports is cleaned of its connections' secrets.

A block opens the connections its step names; their secret values (tokens, passwords) are
known for that attempt only (``connecting.Opened.secrets``). Whatever the block says back —
an error's message and params, a wait message, its log lines and their fields — can quote one
(an echoed response body, an exception carrying a URL with credentials), and from there it
would reach the attempt's row, the run log, the API, the CLI and the operator's Events. Every
outcome and parking is passed through ``redacted`` before it is recorded, whatever the block.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from dirigent.engine.shapes.attempts import LogLine, Outcome, Parking
from dirigent.sdk.secrets import redact, redact_json

__all__ = ["redacted"]


def redacted(result: Outcome | Parking, secrets: Iterable[str]) -> Outcome | Parking:
    found = frozenset(s for s in secrets if s)
    if not found:
        return result
    if isinstance(result, Outcome):
        return _outcome(result, found)
    message = None if result.message is None else redact(result.message, found)
    logs = [_line(line, found) for line in result.logs]
    return dataclasses.replace(result, message=message, logs=logs)


def _outcome(result: Outcome, found: frozenset[str]) -> Outcome:
    message, params = result.error_message, result.error_params
    return dataclasses.replace(
        result,
        error_message=None if message is None else redact(message, found),
        error_params=None if params is None else _object(redact_json(params, found)),
        logs=[_line(line, found) for line in result.logs],
    )


def _line(line: LogLine, secrets: frozenset[str]) -> LogLine:
    return LogLine(
        line.level, redact(line.message, secrets), _object(redact_json(line.fields, secrets))
    )


def _object(value: object) -> dict[str, object]:
    assert isinstance(value, dict)
    return value
