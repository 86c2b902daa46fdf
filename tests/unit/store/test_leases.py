"""The lease helper writes each queue's lease clauses once; these pin what it writes.

A unit test of ``store.leases`` itself: it imports the module below the door on purpose.
"""

from __future__ import annotations

import ast
from pathlib import Path

from dirigent.engine.store.leases import ATTEMPTS, NOTIFICATIONS, REMOTE_CANCELS

STORE = Path(__file__).resolve().parents[3] / "engine/src/dirigent/engine/store"


def test_an_owned_lease_is_taken_renewed_released_and_expires() -> None:
    assert ATTEMPTS.take("$1", "$4") == "lease_owner = $1, lease_expires_at = now() + $4::interval"
    assert ATTEMPTS.renew("$3") == "lease_expires_at = now() + $3::interval"
    assert NOTIFICATIONS.release() == "lease_owner = NULL, lease_expires_at = NULL"
    assert ATTEMPTS.held_by(":worker_id", "l.") == "l.lease_owner = :worker_id"
    assert ATTEMPTS.expired() == "lease_expires_at < now()"


def test_a_cancel_debt_backs_off_exponentially_up_to_its_cap() -> None:
    assert REMOTE_CANCELS.due_now() == (
        "(remote_cancel_due_at IS NULL OR remote_cancel_due_at <= now())"
    )
    taken = REMOTE_CANCELS.take("$3", "a.")
    assert taken.startswith("remote_cancel_tries = a.remote_cancel_tries + 1, ")
    assert "least($3::float8 * 2 ^ a.remote_cancel_tries, 300)" in taken
    assert REMOTE_CANCELS.release() == "remote_cancel_due_at = NULL"


def test_no_transaction_spells_the_lease_columns_in_a_set_clause() -> None:
    """Taking or releasing a lease by hand (``lease_owner = NULL``) bypasses the helper."""
    spelled = []
    for path in sorted((STORE / "transactions").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for clause in ("lease_owner = NULL", "lease_expires_at = now()", "lease_owner = $"):
                    if clause in node.value:
                        spelled.append(f"{path.name}:{node.lineno}: {clause}")
    assert not spelled, spelled
