"""Errors: how a block says what went wrong, and how the engine decides whether to retry.

Why: retries are the engine's, but only the block knows whether a failure is worth
retrying. Every failure is therefore sorted into one of three ``ErrorClass`` values that the
step's retry policy reads. A block raises ``BlockFailure`` built from a catalogued
``Message`` when it knows what happened; anything else it raises is sorted by its
``classify_error``, which defaults to ``classify_default``.

``classify_default`` table (first match wins; the exception's own type, not its cause)::

    BlockFailure                                 its own error_class
    TimeoutError (asyncio's too), ConnectionError
      (refused / reset / aborted, BrokenPipeError) transient
    OSError with a network errno (ETIMEDOUT, ECONNREFUSED, ECONNRESET, EHOSTUNREACH,
      ENETUNREACH, ENETDOWN, EAGAIN, EPIPE) and socket.gaierror EAI_AGAIN
                                                 transient
    PermissionError                              rejected (retrying cannot grant access)
    NotImplementedError                          rejected (the block cannot do this at all)
    anything else (ValueError, TypeError, KeyError, pydantic ValidationError, ...)
                                                 unknown  (retried while budget remains)

``http_status_class`` gives the same sorting for an HTTP status code, for blocks that speak
HTTP: 408, 425, 429 and 5xx are transient, other 4xx rejected, anything else unknown.
"""

from __future__ import annotations

import errno
import math
import socket
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Final

from pydantic import JsonValue

from dirigent.sdk.messages import Message

__all__ = ["BlockFailure", "ErrorClass", "classify_default", "http_status_class", "json_safe"]


class ErrorClass(StrEnum):
    """How a failure is treated by the step's retry policy."""

    TRANSIENT = "transient"
    """Network, 5xx, timeout: retryable."""
    REJECTED = "rejected"
    """Validation, auth, any 4xx but 429: never retried."""
    UNKNOWN = "unknown"
    """Anything else: retried while the step has budget."""


_TRANSIENT_ERRNOS: Final = frozenset(
    {
        errno.ETIMEDOUT,
        errno.ECONNREFUSED,
        errno.ECONNRESET,
        errno.ECONNABORTED,
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
        errno.ENETDOWN,
        errno.EAGAIN,
        errno.EPIPE,
    }
)


def classify_default(error: BaseException) -> ErrorClass:
    """Sort an exception by the table in this module's docstring."""
    if isinstance(error, BlockFailure):
        return error.error_class
    if isinstance(error, TimeoutError | ConnectionError):
        return ErrorClass.TRANSIENT
    if isinstance(error, socket.gaierror):
        return ErrorClass.TRANSIENT if error.errno == socket.EAI_AGAIN else ErrorClass.UNKNOWN
    if isinstance(error, PermissionError):
        return ErrorClass.REJECTED
    if isinstance(error, OSError) and error.errno in _TRANSIENT_ERRNOS:
        return ErrorClass.TRANSIENT
    if isinstance(error, NotImplementedError):
        return ErrorClass.REJECTED
    return ErrorClass.UNKNOWN


def http_status_class(status: int) -> ErrorClass:
    """Sort an HTTP status: 408/425/429/5xx transient, other 4xx rejected, else unknown."""
    if status in (408, 425, 429) or 500 <= status <= 599:
        return ErrorClass.TRANSIENT
    if 400 <= status <= 499:
        return ErrorClass.REJECTED
    return ErrorClass.UNKNOWN


def json_safe(value: object) -> JsonValue:
    """``value`` if it is plain JSON data, else its ``str()`` (recursively for containers).

    Failure and issue params travel into database rows and problem documents, so they must
    be JSON; coercing (rather than refusing) keeps a failure from failing to be raised.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return str(value)


class BlockFailure(Exception):
    """A refusal a block raises on purpose, rendered from its catalogued ``Message``.

    ``BlockFailure(HTTP_STATUS, error_class=ErrorClass.TRANSIENT, status=503)`` carries the
    stable ``code``, the rendered ``message``, the ``params`` that filled it (coerced to
    JSON with ``json_safe``) and the ``error_class`` the retry policy reads.
    """

    source: Message
    code: str
    message: str
    params: dict[str, JsonValue]
    error_class: ErrorClass

    def __init__(
        self,
        message: Message,
        /,
        *,
        error_class: ErrorClass = ErrorClass.UNKNOWN,
        **params: object,
    ) -> None:
        safe = {name: json_safe(value) for name, value in params.items()}
        self.source = message
        self.code = message.code
        self.params = safe
        self.error_class = ErrorClass(error_class)
        self.message = message.render(**params)
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return (
            f"BlockFailure(code={self.code!r}, message={self.message!r}, "
            f"error_class={self.error_class.value!r}, params={self.params!r})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions pickle through ``args``; ours are keyword-only, so rebuild explicitly.
        return (_rebuild_failure, (self.source, self.error_class, self.params, self.message))


def _rebuild_failure(
    source: Message, error_class: ErrorClass, params: dict[str, JsonValue], message: str
) -> BlockFailure:
    failure = BlockFailure(source, error_class=error_class, **params)
    failure.message = message
    return failure
