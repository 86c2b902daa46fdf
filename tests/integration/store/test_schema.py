"""The migrated schema is exactly `tables.metadata`, and the constraints it promises hold.

A unit test of ``store.schema`` itself: it imports the module below the door on purpose.
"""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, insert, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from dirigent.engine.infrastructure.embedded import EmbeddedPostgres
from dirigent.engine.store.schema import tables as t
from dirigent.engine.store.schema.database import (
    create_database,
    create_engine,
    current_revision,
    head_revision,
    upgrade_async,
)

pytestmark = pytest.mark.integration


def _diff(connection: Connection) -> list[object]:
    context = MigrationContext.configure(
        connection, opts={"compare_type": True, "compare_server_default": True}
    )
    return list(compare_metadata(context, t.metadata))


async def test_baseline_migration_matches_metadata(pg_server: EmbeddedPostgres) -> None:
    await create_database(pg_server.url, "migrate_from_empty")
    url = pg_server.url_for("migrate_from_empty")
    assert await current_revision(url) is None

    result = await upgrade_async(url)
    assert (result.before, result.after) == (None, head_revision())
    assert result.changed

    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            assert await connection.run_sync(_diff) == []
            names = set(
                (
                    await connection.execute(
                        text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
                    )
                ).scalars()
            )
        assert names == {*t.metadata.tables, "alembic_version"}
    finally:
        await engine.dispose()

    again = await upgrade_async(url)
    assert not again.changed


async def test_metadata_drift_is_detected(engine: AsyncEngine) -> None:
    # Guards the test above: a comparison that could not see a difference proves nothing.
    async with engine.begin() as connection:
        await connection.execute(text("ALTER TABLE runs DROP COLUMN failed_step"))
        diff = await connection.run_sync(_diff)
    assert any("failed_step" in repr(d) for d in diff)


async def _pipeline_with_version(engine: AsyncEngine) -> tuple[int, int]:
    async with engine.begin() as connection:
        pipeline_id = (
            await connection.execute(
                insert(t.pipelines).values(namespace="ns", name="p").returning(t.pipelines.c.id)
            )
        ).scalar_one()
        version_id = (
            await connection.execute(
                insert(t.pipeline_versions)
                .values(pipeline_id=pipeline_id, number=1, digest="0" * 64, document={"a": 1})
                .returning(t.pipeline_versions.c.id)
            )
        ).scalar_one()
        await connection.execute(t.pipelines.update().values(current_version_id=version_id))
    return pipeline_id, version_id


async def test_defaults_and_round_trip(engine: AsyncEngine) -> None:
    pipeline_id, version_id = await _pipeline_with_version(engine)
    async with engine.begin() as connection:
        run = (
            await connection.execute(
                insert(t.runs)
                .values(
                    namespace="ns",
                    pipeline_id=pipeline_id,
                    version_id=version_id,
                    triggered_by_kind="manual",
                )
                .returning(t.runs)
            )
        ).one()
    assert run.status == "queued"
    assert run.priority == t.PRIORITY_NORMAL
    assert run.params == {}
    assert run.requires_workers == []
    assert run.created_at.tzinfo is not None


async def test_enum_check_rejects_unknown_value(engine: AsyncEngine) -> None:
    with pytest.raises(IntegrityError, match="ck_pipelines_importance"):
        async with engine.begin() as connection:
            await connection.execute(
                insert(t.pipelines).values(namespace="ns", name="p", importance="urgent")
            )


async def test_attempt_numbers_unique_even_without_item(engine: AsyncEngine) -> None:
    pipeline_id, version_id = await _pipeline_with_version(engine)
    async with engine.begin() as connection:
        run_id = (
            await connection.execute(
                insert(t.runs)
                .values(
                    namespace="ns",
                    pipeline_id=pipeline_id,
                    version_id=version_id,
                    triggered_by_kind="api",
                )
                .returning(t.runs.c.id)
            )
        ).scalar_one()
        attempt = {"run_id": run_id, "step": "s", "number": 1, "block": "noop"}
        await connection.execute(insert(t.step_attempts).values(**attempt))
    with pytest.raises(IntegrityError, match="uq_step_attempts_run_id_step_item_index_number"):
        async with engine.begin() as connection:
            await connection.execute(insert(t.step_attempts).values(**attempt))


async def test_deleting_a_pipeline_deletes_its_history(engine: AsyncEngine) -> None:
    pipeline_id, version_id = await _pipeline_with_version(engine)
    async with engine.begin() as connection:
        run_id = (
            await connection.execute(
                insert(t.runs)
                .values(
                    namespace="ns",
                    pipeline_id=pipeline_id,
                    version_id=version_id,
                    triggered_by_kind="cli",
                )
                .returning(t.runs.c.id)
            )
        ).scalar_one()
        await connection.execute(insert(t.log_entries).values(run_id=run_id, message="hello"))
        await connection.execute(t.pipelines.delete().where(t.pipelines.c.id == pipeline_id))
        left = (await connection.execute(select(t.log_entries.c.id))).all()
    assert left == []


async def test_each_test_gets_its_own_database(engine: AsyncEngine, db_url: str) -> None:
    async with engine.connect() as connection:
        name = (await connection.execute(text("SELECT current_database()"))).scalar_one()
        count = (await connection.execute(select(t.pipelines.c.id))).all()
    assert db_url.endswith("/" + name)
    assert name.startswith("test_")
    assert count == []  # nothing leaks from other tests
