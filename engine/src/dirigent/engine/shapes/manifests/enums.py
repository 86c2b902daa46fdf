"""The closed vocabularies of the manifest format, as CamelCase values (Kubernetes style).

Each maps one to one to the seed design's snake_case value (``OneFailed`` ↔ ``one_failed``);
the engine stores the snake_case form in its rows, through ``.engine_value``.
"""

from __future__ import annotations

import enum
import re
from typing import Final


class _CamelEnum(enum.StrEnum):
    @property
    def engine_value(self) -> str:
        """The snake_case spelling the engine stores: OneFailed -> one_failed."""
        return re.sub(r"(?<!^)(?=[A-Z])", "_", self.value).lower()


class TriggerRule(_CamelEnum):
    ALL_SUCCESS = "AllSuccess"
    ALL_DONE = "AllDone"
    ONE_FAILED = "OneFailed"
    ALWAYS = "Always"


class ItemFailurePolicy(_CamelEnum):
    FAIL_FAST = "FailFast"
    CONTINUE = "Continue"


class TimeoutOutcome(_CamelEnum):
    FAIL = "Fail"
    SKIP = "Skip"


class ConcurrencyPolicy(_CamelEnum):
    ALLOW = "Allow"
    SKIP = "Skip"
    QUEUE = "Queue"
    REPLACE = "Replace"


class Priority(_CamelEnum):
    LOW = "Low"
    NORMAL = "Normal"
    HIGH = "High"

    @property
    def rank(self) -> int:
        """Claim order: higher is claimed first. The one definition; the table's CHECK uses it."""
        return PRIORITY_RANKS[self]


PRIORITY_RANKS: Final[dict[Priority, int]] = {Priority.LOW: 0, Priority.NORMAL: 1, Priority.HIGH: 2}


class Importance(_CamelEnum):
    ROUTINE = "Routine"
    NORMAL = "Normal"
    CRITICAL = "Critical"


class DeletionPolicy(_CamelEnum):
    RETAIN = "Retain"
    DELETE = "Delete"


class AlertEvent(_CamelEnum):
    RUN_FAILED = "RunFailed"
    RUN_COMPLETED_WITH_ERRORS = "RunCompletedWithErrors"
    RUN_SUCCEEDED = "RunSucceeded"
    RUN_STUCK = "RunStuck"
