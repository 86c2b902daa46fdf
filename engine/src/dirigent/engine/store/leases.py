"""Leases: the one way a leased queue's row is taken, renewed, released and recovered.

Three queues lease their rows: attempts (a worker runs the block), notifications (a worker
delivers the alert) and cancel debts (the sweeper tells a remote to stop). The first two hold
a row for an *owner* until a deadline: taken with ``FOR UPDATE SKIP LOCKED`` so two takers
never hold one row, renewed by a heartbeat, released when the outcome is written, recovered
by the sweeper once the deadline passed. A cancel debt has no owner: a try takes it by
pushing its due time out with exponential backoff, so an unanswered try is taken again once
due and an answered one releases it.

Every statement that touches these columns builds its clauses here, so the column names and
the expressions that take and release a lease are written once. The fragments are plain SQL
text with the caller's placeholders (``$1`` or ``:owner``) passed in; they never hold values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["ATTEMPTS", "NOTIFICATIONS", "REMOTE_CANCELS", "BackoffLease", "Lease"]


@dataclass(frozen=True)
class Lease:
    """A row held by one owner until a deadline."""

    owner: str = "lease_owner"
    until: str = "lease_expires_at"

    def take(self, owner: str, ttl: str) -> str:
        """``SET`` clauses that hand the row to ``owner`` for ``ttl`` (an interval)."""
        return f"{self.owner} = {owner}, {self.until} = now() + {ttl}::interval"

    def renew(self, ttl: str) -> str:
        return f"{self.until} = now() + {ttl}::interval"

    def release(self) -> str:
        return f"{self.owner} = NULL, {self.until} = NULL"

    def held_by(self, owner: str, row: str = "") -> str:
        """The row is still ``owner``'s (``row``: a table alias with its dot, e.g. ``l.``)."""
        return f"{row}{self.owner} = {owner}"

    def expired(self, row: str = "") -> str:
        return f"{row}{self.until} < now()"


@dataclass(frozen=True)
class BackoffLease:
    """A debt tried again with exponential backoff: the tries so far and when one is due."""

    tries: str
    due: str
    cap_seconds: int = 300

    def due_now(self, row: str = "") -> str:
        return f"({row}{self.due} IS NULL OR {row}{self.due} <= now())"

    def take(self, first_backoff: str, row: str) -> str:
        """``SET`` clauses for one more try: the next one is due after ``first * 2^tries``."""
        return (
            f"{self.tries} = {row}{self.tries} + 1, {self.due} = now() + make_interval("
            f"secs => least({first_backoff}::float8 * 2 ^ {row}{self.tries}, {self.cap_seconds}))"
        )

    def release(self) -> str:
        return f"{self.due} = NULL"


ATTEMPTS: Final = Lease()
NOTIFICATIONS: Final = Lease()
REMOTE_CANCELS: Final = BackoffLease("remote_cancel_tries", "remote_cancel_due_at")
