"""The status words of runs and of work (steps, items, attempts), in one place.

The store's tables limit each status column to these values with a CHECK constraint
(``store.tables`` builds the constraints from them, and a test reads the constraints back
from a migrated database), so a word used in a query that is not here is a bug the test
catches rather than a row the database refuses at run time.
"""

from __future__ import annotations

import enum


class RunStatus(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    COMPLETED_WITH_ERRORS = "completed_with_errors"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self not in (RunStatus.QUEUED, RunStatus.RUNNING)


class WorkStatus(enum.StrEnum):
    """A step of a run, an item of its fan-out, or an attempt at either."""

    PENDING = "pending"
    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"
    # A step that never ran because an upstream failed (Airflow's upstream_failed); only
    # run_steps carry it, their attempts and items read `skipped`.
    UPSTREAM_FAILED = "upstream_failed"

    @property
    def terminal(self) -> bool:
        return self in WORK_TERMINAL


# The one definition of "terminal" (a status nothing moves on from): every other module
# (queries, progression, the API's feeds, the CLI's followers) reads these sets.
RUN_TERMINAL: frozenset[RunStatus] = frozenset(s for s in RunStatus if s.terminal)
# A step is terminal in these; items and attempts never carry upstream_failed.
WORK_TERMINAL: frozenset[WorkStatus] = frozenset(
    {
        WorkStatus.SUCCEEDED,
        WorkStatus.FAILED,
        WorkStatus.SKIPPED,
        WorkStatus.CANCELLED,
        WorkStatus.UPSTREAM_FAILED,
    }
)
ATTEMPT_TERMINAL: tuple[WorkStatus, ...] = tuple(
    s for s in WorkStatus if s in WORK_TERMINAL and s is not WorkStatus.UPSTREAM_FAILED
)
