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


RUN_TERMINAL: frozenset[RunStatus] = frozenset(s for s in RunStatus if s.terminal)
