"""What a worker holds and what it reports: the shapes of an attempt's life in a worker.

A worker holds a ``Claimed`` attempt (taken with a lease by ``store.claims``), runs its block,
and reports either an ``Outcome`` (the attempt's result, recorded by ``store.outcomes``) or a
``Parking`` (the attempt goes back to waiting: a sensor's NotYet, a remote job still
running), each with the ``LogLine``s the block wrote. These are plain values below the store
in the engine's layers, so the runtime that builds them and the store that writes them both
stand on this module rather than one on the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any


@dataclass(frozen=True)
class Claimed:
    """One attempt this worker now holds a lease on."""

    id: int
    run_id: int
    run_item_id: int | None
    step: str
    item_index: int | None
    number: int
    kind: str
    block: str
    first_started_at: datetime
    cursor: dict[str, Any] | None
    handle: dict[str, Any] | None
    fetched: Any
    wait_message: str | None
    gone_count: int
    due_at: datetime  # when it became claimable: available_at or next_poll_at
    params: dict[str, Any]
    version_id: int
    window: tuple[datetime, datetime] | None
    namespace: str
    pipeline: str
    item_value: Any
    probe_errors: int = 0  # consecutive probe or fetch errors so far

    @property
    def probing(self) -> bool:
        """True when this is a waiting attempt come due (a poke or a probe), not a first run."""
        return self.handle is not None or self.cursor is not None or self.wait_message is not None


@dataclass
class LogLine:
    level: str
    message: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class Artifact:
    name: str
    content_type: str
    size: int
    digest: str
    inline: Any = None
    uri: str | None = None


@dataclass
class Outcome:
    """What a worker reports for an attempt it held."""

    attempt: Claimed
    worker_id: str
    status: str  # succeeded | failed | skipped
    input: Any = None
    output: Any = None
    artifact: Artifact | None = None
    error_class: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    error_params: dict[str, Any] | None = None
    logs: list[LogLine] = field(default_factory=list)


@dataclass
class Parking:
    """A running attempt going back to waiting: a sensor's NotYet, a remote job still running."""

    attempt: Claimed
    next_poll: timedelta
    handle: dict[str, Any] | None = None
    cursor: dict[str, Any] | None = None
    message: str | None = None
    progress: float | None = None
    gone_count: int = 0
    probe_errors: int = 0
    input: Any = None
    logs: list[LogLine] = field(default_factory=list)
