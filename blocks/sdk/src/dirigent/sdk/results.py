"""Results: what an operator or sensor hands back when the answer is "not finished here".

Why: submit-then-probe is the engine's core primitive. An operator returns a
``RemoteHandle`` to say "this continues elsewhere"; the engine parks the attempt and later
calls ``probe`` (any worker, any number of times), which answers with a ``ProbeResult``.
A sensor returns ``NotYet`` to say "the condition does not hold yet"; that is not an error
and spends no retry budget.

Invariants the engine relies on:

* ``ProbeResult.meta``, when given, *replaces* the handle's meta for every later probe and
  the fetch (it is how a probe records how far it has read). It is written at least once,
  so a probe must tolerate reading the same ground twice.
* ``NotYet.cursor``, when given, replaces the cursor the next poke receives as
  ``ctx.cursor``; it lives only as long as the waiting attempt and is at-least-once too.
* ``progress`` is a fraction in [0, 1].
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from dirigent.sdk.errors import ErrorClass
from dirigent.sdk.names import BlockId

__all__ = ["NotYet", "ProbeResult", "ProbeStatus", "RemoteHandle"]

_Progress = Field(default=None, ge=0.0, le=1.0, allow_inf_nan=False)


class RemoteHandle(BaseModel):
    """Serialisable claim on a job submitted to an external system.

    ``ref`` is the remote system's own job identifier; ``meta`` is small string state the
    operator wants back on every probe (a namespace, a log offset).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    block_id: BlockId
    ref: str = Field(min_length=1)
    meta: dict[str, str] = Field(default_factory=dict)


class ProbeStatus(StrEnum):
    """The remote work's state, mapped honestly from the remote system's vocabulary."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    GONE = "gone"
    """The remote system no longer knows this job."""


class ProbeResult(BaseModel):
    """One probe's answer.

    ``error_class`` matters only when ``status`` is FAILED: how the retry policy treats the
    failed remote work (None: the engine's default, unknown).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: ProbeStatus
    message: str | None = None
    progress: float | None = _Progress
    meta: dict[str, str] | None = None
    error_class: ErrorClass | None = None

    @classmethod
    def running(
        cls,
        message: str | None = None,
        *,
        progress: float | None = None,
        meta: dict[str, str] | None = None,
    ) -> ProbeResult:
        """Still going."""
        return cls(status=ProbeStatus.RUNNING, message=message, progress=progress, meta=meta)

    @classmethod
    def succeeded(
        cls, message: str | None = None, *, meta: dict[str, str] | None = None
    ) -> ProbeResult:
        """Done; the engine calls ``fetch`` next."""
        return cls(status=ProbeStatus.SUCCEEDED, message=message, progress=1.0, meta=meta)

    @classmethod
    def failed(
        cls,
        message: str,
        *,
        error_class: ErrorClass | None = None,
        meta: dict[str, str] | None = None,
    ) -> ProbeResult:
        """The remote work failed."""
        return cls(status=ProbeStatus.FAILED, message=message, error_class=error_class, meta=meta)

    @classmethod
    def gone(cls, message: str | None = None) -> ProbeResult:
        """The remote system no longer knows the job."""
        return cls(status=ProbeStatus.GONE, message=message)


class NotYet(BaseModel):
    """A sensor's "not yet": optional message, progress, and a cursor for the next poke."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    message: str | None = None
    progress: float | None = _Progress
    cursor: dict[str, JsonValue] | None = None
