"""Baseline: every table of dirigent.engine.store.schema.tables as of the first release.

Revision ID: 0001_baseline
Revises:
Create Date: 2026-12-02 12:15:04.793831
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = '0001_baseline'
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('connections',
    sa.Column('id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('namespace', sa.Text(), nullable=False),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('type', sa.Text(), nullable=False),
    sa.Column('settings', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('secrets', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('digest', sa.CHAR(length=64), nullable=False),
    sa.Column('owner_uid', sa.Text(), nullable=True),
    sa.Column('created_at', postgresql.TIMESTAMP(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('updated_at', postgresql.TIMESTAMP(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('last_check_at', postgresql.TIMESTAMP(timezone=True), nullable=True),
    sa.Column('last_check_ok', sa.Boolean(), nullable=True),
    sa.Column('last_check_message', sa.Text(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_connections')),
    sa.UniqueConstraint('namespace', 'name', name=op.f('uq_connections_namespace_name'))
    )
    op.create_table('pipelines',
    sa.Column('id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('namespace', sa.Text(), nullable=False),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('active', sa.Boolean(), server_default=sa.text('true'), nullable=False),
    sa.Column('current_version_id', sa.BigInteger(), nullable=True),
    sa.Column('importance', sa.String(length=32), server_default=sa.text("'normal'"), nullable=False),
    sa.Column('deletion_policy', sa.String(length=32), server_default=sa.text("'retain'"), nullable=False),
    sa.Column('owner_uid', sa.Text(), nullable=True),
    sa.Column('created_at', postgresql.TIMESTAMP(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('updated_at', postgresql.TIMESTAMP(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.CheckConstraint("deletion_policy IN ('retain', 'delete')", name=op.f('ck_pipelines_deletion_policy')),
    sa.CheckConstraint("importance IN ('routine', 'normal', 'critical')", name=op.f('ck_pipelines_importance')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_pipelines')),
    sa.UniqueConstraint('namespace', 'name', name=op.f('uq_pipelines_namespace_name'))
    )
    op.create_table('workers',
    sa.Column('id', sa.Text(), nullable=False),
    sa.Column('hostname', sa.Text(), nullable=False),
    sa.Column('version', sa.Text(), nullable=False),
    sa.Column('plugins', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'[]'::jsonb"), nullable=False),
    sa.Column('tags', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'[]'::jsonb"), nullable=False),
    sa.Column('concurrency', sa.Integer(), nullable=False),
    sa.Column('started_at', postgresql.TIMESTAMP(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('last_seen_at', postgresql.TIMESTAMP(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('status', sa.String(length=32), server_default=sa.text("'active'"), nullable=False),
    sa.CheckConstraint("status IN ('active', 'gone', 'stopped')", name=op.f('ck_workers_status')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_workers'))
    )
    op.create_table('pipeline_versions',
    sa.Column('id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('pipeline_id', sa.BigInteger(), nullable=False),
    sa.Column('number', sa.Integer(), nullable=False),
    sa.Column('digest', sa.CHAR(length=64), nullable=False),
    sa.Column('document', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('provenance', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('created_at', postgresql.TIMESTAMP(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['pipeline_id'], ['pipelines.id'], name=op.f('fk_pipeline_versions_pipeline_id_pipelines'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_pipeline_versions')),
    sa.UniqueConstraint('pipeline_id', 'number', name=op.f('uq_pipeline_versions_pipeline_id_number'))
    )
    # pipelines <-> pipeline_versions reference each other: this side is added once both exist.
    op.create_foreign_key(op.f('fk_pipelines_current_version_id_pipeline_versions'), 'pipelines', 'pipeline_versions', ['current_version_id'], ['id'], ondelete='SET NULL')
    op.create_table('runs',
    sa.Column('id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('namespace', sa.Text(), nullable=False),
    sa.Column('pipeline_id', sa.BigInteger(), nullable=False),
    sa.Column('version_id', sa.BigInteger(), nullable=False),
    sa.Column('status', sa.String(length=32), server_default=sa.text("'queued'"), nullable=False),
    sa.Column('params', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('priority', sa.SmallInteger(), server_default=sa.text('1'), nullable=False),
    sa.Column('requires_workers', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'[]'::jsonb"), nullable=False),
    sa.Column('triggered_by_kind', sa.String(length=32), nullable=False),
    sa.Column('triggered_by_ref', sa.Text(), nullable=True),
    sa.Column('parent_run_id', sa.BigInteger(), nullable=True),
    sa.Column('window_start', postgresql.TIMESTAMP(timezone=True), nullable=True),
    sa.Column('window_end', postgresql.TIMESTAMP(timezone=True), nullable=True),
    sa.Column('created_at', postgresql.TIMESTAMP(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('started_at', postgresql.TIMESTAMP(timezone=True), nullable=True),
    sa.Column('finished_at', postgresql.TIMESTAMP(timezone=True), nullable=True),
    sa.Column('last_progress_at', postgresql.TIMESTAMP(timezone=True), nullable=True),
    sa.Column('error_message', sa.Text(), nullable=True),
    sa.Column('failed_step', sa.Text(), nullable=True),
    sa.Column('idempotency_key', sa.Text(), nullable=True),
    sa.CheckConstraint("status IN ('queued', 'running', 'succeeded', 'completed_with_errors', 'failed', 'cancelled')", name=op.f('ck_runs_status')),
    sa.CheckConstraint("triggered_by_kind IN ('manual', 'api', 'schedule', 'webhook', 'backfill', 'pipeline', 'cli')", name=op.f('ck_runs_triggered_by_kind')),
    sa.CheckConstraint('priority BETWEEN 0 AND 2', name=op.f('ck_runs_priority')),
    sa.ForeignKeyConstraint(['parent_run_id'], ['runs.id'], name=op.f('fk_runs_parent_run_id_runs'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['pipeline_id'], ['pipelines.id'], name=op.f('fk_runs_pipeline_id_pipelines'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['version_id'], ['pipeline_versions.id'], name=op.f('fk_runs_version_id_pipeline_versions')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_runs'))
    )
    op.create_index('ix_runs_parent_run_id', 'runs', ['parent_run_id'], unique=False, postgresql_where=sa.text('parent_run_id IS NOT NULL'))
    op.create_index('ix_runs_pipeline_id_status', 'runs', ['pipeline_id', 'status'], unique=False)
    op.create_index('ix_runs_status_in_flight', 'runs', ['status'], unique=False, postgresql_where=sa.text("status IN ('queued', 'running')"))
    op.create_index('uq_runs_pipeline_id_idempotency_key', 'runs', ['pipeline_id', 'idempotency_key'], unique=True, postgresql_where=sa.text('idempotency_key IS NOT NULL'))
    op.create_table('log_entries',
    sa.Column('id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('run_id', sa.BigInteger(), nullable=False),
    sa.Column('attempt_id', sa.BigInteger(), nullable=True),
    sa.Column('run_item_id', sa.BigInteger(), nullable=True),
    sa.Column('step', sa.Text(), nullable=True),
    sa.Column('level', sa.String(length=32), server_default=sa.text("'info'"), nullable=False),
    sa.Column('message', sa.Text(), nullable=False),
    sa.Column('fields', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('created_at', postgresql.TIMESTAMP(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.CheckConstraint("level IN ('debug', 'info', 'warning', 'error')", name=op.f('ck_log_entries_level')),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], name=op.f('fk_log_entries_run_id_runs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_log_entries'))
    )
    op.create_index('ix_log_entries_run_id_id', 'log_entries', ['run_id', 'id'], unique=False)
    op.create_table('run_items',
    sa.Column('id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('run_id', sa.BigInteger(), nullable=False),
    sa.Column('step', sa.Text(), nullable=False),
    sa.Column('index', sa.Integer(), nullable=False),
    sa.Column('value', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.Column('status', sa.String(length=32), server_default=sa.text("'pending'"), nullable=False),
    sa.Column('error_message', sa.Text(), nullable=True),
    sa.Column('created_at', postgresql.TIMESTAMP(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('finished_at', postgresql.TIMESTAMP(timezone=True), nullable=True),
    sa.CheckConstraint("status IN ('pending', 'queued', 'running', 'waiting', 'succeeded', 'failed', 'skipped', 'cancelled')", name=op.f('ck_run_items_status')),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], name=op.f('fk_run_items_run_id_runs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_run_items')),
    sa.UniqueConstraint('run_id', 'step', 'index', name=op.f('uq_run_items_run_id_step_index'))
    )
    op.create_table('step_attempts',
    sa.Column('id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('run_id', sa.BigInteger(), nullable=False),
    sa.Column('run_item_id', sa.BigInteger(), nullable=True),
    sa.Column('step', sa.Text(), nullable=False),
    sa.Column('item_index', sa.Integer(), nullable=True),
    sa.Column('number', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=32), server_default=sa.text("'automatic'"), nullable=False),
    sa.Column('status', sa.String(length=32), server_default=sa.text("'pending'"), nullable=False),
    sa.Column('priority', sa.SmallInteger(), server_default=sa.text('1'), nullable=False),
    sa.Column('requires_workers', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'[]'::jsonb"), nullable=False),
    sa.Column('block', sa.Text(), nullable=False),
    sa.Column('available_at', postgresql.TIMESTAMP(timezone=True), nullable=True),
    sa.Column('next_poll_at', postgresql.TIMESTAMP(timezone=True), nullable=True),
    sa.Column('lease_owner', sa.Text(), nullable=True),
    sa.Column('lease_expires_at', postgresql.TIMESTAMP(timezone=True), nullable=True),
    sa.Column('input', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.Column('output', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.Column('handle', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.Column('fetched', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.Column('cursor', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.Column('wait_message', sa.Text(), nullable=True),
    sa.Column('wait_progress', sa.Double(), nullable=True),
    sa.Column('gone_count', sa.Integer(), server_default=sa.text('0'), nullable=False),
    sa.Column('error_class', sa.Text(), nullable=True),
    sa.Column('error_code', sa.Text(), nullable=True),
    sa.Column('error_message', sa.Text(), nullable=True),
    sa.Column('error_params', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.Column('idempotency_key', sa.Text(), nullable=True),
    sa.Column('created_at', postgresql.TIMESTAMP(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('first_started_at', postgresql.TIMESTAMP(timezone=True), nullable=True),
    sa.Column('started_at', postgresql.TIMESTAMP(timezone=True), nullable=True),
    sa.Column('finished_at', postgresql.TIMESTAMP(timezone=True), nullable=True),
    sa.CheckConstraint("kind IN ('automatic', 'manual')", name=op.f('ck_step_attempts_kind')),
    sa.CheckConstraint("status IN ('pending', 'queued', 'running', 'waiting', 'succeeded', 'failed', 'skipped', 'cancelled')", name=op.f('ck_step_attempts_status')),
    sa.CheckConstraint('number >= 1', name=op.f('ck_step_attempts_number_positive')),
    sa.CheckConstraint('priority BETWEEN 0 AND 2', name=op.f('ck_step_attempts_priority')),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], name=op.f('fk_step_attempts_run_id_runs'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['run_item_id'], ['run_items.id'], name=op.f('fk_step_attempts_run_item_id_run_items'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_step_attempts')),
    sa.UniqueConstraint('run_id', 'step', 'item_index', 'number', name=op.f('uq_step_attempts_run_id_step_item_index_number'), postgresql_nulls_not_distinct=True)
    )
    op.create_index('ix_step_attempts_claim_queued', 'step_attempts', [sa.literal_column('priority DESC'), 'available_at', 'id'], unique=False, postgresql_where=sa.text("status = 'queued'"))
    op.create_index('ix_step_attempts_lease_expires_at_running', 'step_attempts', ['lease_expires_at'], unique=False, postgresql_where=sa.text("status = 'running'"))
    op.create_index('ix_step_attempts_next_poll_at_waiting', 'step_attempts', ['next_poll_at'], unique=False, postgresql_where=sa.text("status = 'waiting'"))
    op.create_index('ix_step_attempts_run_id_step', 'step_attempts', ['run_id', 'step'], unique=False)
    op.create_index('ix_step_attempts_run_item_id', 'step_attempts', ['run_item_id'], unique=False, postgresql_where=sa.text('run_item_id IS NOT NULL'))
    op.create_index('uq_step_attempts_idempotency_key', 'step_attempts', ['idempotency_key'], unique=True, postgresql_where=sa.text('idempotency_key IS NOT NULL'))
    op.create_table('artifact_refs',
    sa.Column('id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('run_id', sa.BigInteger(), nullable=False),
    sa.Column('attempt_id', sa.BigInteger(), nullable=True),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('content_type', sa.Text(), nullable=False),
    sa.Column('size', sa.BigInteger(), nullable=False),
    sa.Column('digest', sa.CHAR(length=64), nullable=False),
    sa.Column('inline', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.Column('uri', sa.Text(), nullable=True),
    sa.Column('created_at', postgresql.TIMESTAMP(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.CheckConstraint('(inline IS NULL) <> (uri IS NULL)', name=op.f('ck_artifact_refs_inline_xor_uri')),
    sa.ForeignKeyConstraint(['attempt_id'], ['step_attempts.id'], name=op.f('fk_artifact_refs_attempt_id_step_attempts'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], name=op.f('fk_artifact_refs_run_id_runs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_artifact_refs'))
    )
    op.create_index('ix_artifact_refs_attempt_id', 'artifact_refs', ['attempt_id'], unique=False, postgresql_where=sa.text('attempt_id IS NOT NULL'))
    op.create_index('ix_artifact_refs_run_id', 'artifact_refs', ['run_id'], unique=False)


def downgrade() -> None:
    op.drop_constraint(op.f('fk_pipelines_current_version_id_pipeline_versions'), 'pipelines', type_='foreignkey')
    op.drop_index('ix_artifact_refs_run_id', table_name='artifact_refs')
    op.drop_index('ix_artifact_refs_attempt_id', table_name='artifact_refs', postgresql_where=sa.text('attempt_id IS NOT NULL'))
    op.drop_table('artifact_refs')
    op.drop_index('uq_step_attempts_idempotency_key', table_name='step_attempts', postgresql_where=sa.text('idempotency_key IS NOT NULL'))
    op.drop_index('ix_step_attempts_run_item_id', table_name='step_attempts', postgresql_where=sa.text('run_item_id IS NOT NULL'))
    op.drop_index('ix_step_attempts_run_id_step', table_name='step_attempts')
    op.drop_index('ix_step_attempts_next_poll_at_waiting', table_name='step_attempts', postgresql_where=sa.text("status = 'waiting'"))
    op.drop_index('ix_step_attempts_lease_expires_at_running', table_name='step_attempts', postgresql_where=sa.text("status = 'running'"))
    op.drop_index('ix_step_attempts_claim_queued', table_name='step_attempts', postgresql_where=sa.text("status = 'queued'"))
    op.drop_table('step_attempts')
    op.drop_table('run_items')
    op.drop_index('ix_log_entries_run_id_id', table_name='log_entries')
    op.drop_table('log_entries')
    op.drop_index('uq_runs_pipeline_id_idempotency_key', table_name='runs', postgresql_where=sa.text('idempotency_key IS NOT NULL'))
    op.drop_index('ix_runs_status_in_flight', table_name='runs', postgresql_where=sa.text("status IN ('queued', 'running')"))
    op.drop_index('ix_runs_pipeline_id_status', table_name='runs')
    op.drop_index('ix_runs_parent_run_id', table_name='runs', postgresql_where=sa.text('parent_run_id IS NOT NULL'))
    op.drop_table('runs')
    op.drop_table('pipeline_versions')
    op.drop_table('workers')
    op.drop_table('pipelines')
    op.drop_table('connections')
