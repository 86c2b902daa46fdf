"""Bringing a database to this release's schema, for the processes that do it.

``dirigent migrate`` (the Helm hook Job), ``dirigent dev`` and the test harness migrate
before any ``Engine`` exists, so this is the door's one verb that needs no engine: it wraps
the store's schema module and turns every way a migration can fail into ``MigrationFailed``
with one line a person can act on (the driver's first line, never a traceback).
"""

from __future__ import annotations

from dirigent.engine.store.schema.database import (
    MIGRATION_ERRORS,
    MigrationResult,
    head_revision,
    upgrade_async,
)

__all__ = ["MigrationFailed", "MigrationResult", "migrate", "schema_head"]


class MigrationFailed(Exception):
    """The database could not be migrated; ``str()`` is one line saying why."""


def schema_head() -> str:
    """The schema revision this release expects."""
    return head_revision()


async def migrate(url: str, revision: str = "head") -> MigrationResult:
    """Migrate the database at ``url`` to ``revision`` (under an advisory lock; idempotent)."""
    try:
        return await upgrade_async(url, revision)
    except MIGRATION_ERRORS as err:
        reason = str(getattr(err, "orig", None) or err).splitlines()[0]
        raise MigrationFailed(reason) from None
