"""Alerting and reports at finish, and the notification queue.

``on_finished`` runs inside the transaction that finishes a run (one call from
``store.progress.finish_run``): it renders the run's report and stores it as a run artifact,
then raises a notification row for every alert rule the outcome matches. Raising and
finishing are one commit, so a run never reaches a terminal state without what it owes being
written down; a pipeline with neither a report nor alerts pays nothing.

Notifications are claimed like attempts (``FOR UPDATE SKIP LOCKED``, a lease, exponential
backoff, a terminal ``failed``), and every step — queued, delivered, retried, given up — is
written to the run's own log, so "the alert never arrived" is answerable from the run.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import asyncpg

from dirigent.engine.rules.templates import (
    BODY_MAX,
    DEFAULT_BODY,
    DEFAULT_REPORT,
    DEFAULT_SUBJECT,
    SUBJECT_MAX,
    RenderError,
    render,
)
from dirigent.engine.shapes.manifests.enums import AlertEvent, Importance
from dirigent.engine.shapes.manifests.pipeline import Alert, Pipeline
from dirigent.engine.shapes.statuses import RunStatus
from dirigent.engine.store.leases import NOTIFICATIONS
from dirigent.engine.store.pool import affected
from dirigent.engine.store.schema.tables import REPORT_ARTIFACT
from dirigent.engine.store.transactions.logs import log_run

EVENT_OF_STATUS = {
    "failed": AlertEvent.RUN_FAILED,
    "completed_with_errors": AlertEvent.RUN_COMPLETED_WITH_ERRORS,
    "succeeded": AlertEvent.RUN_SUCCEEDED,
}
_RANK = {Importance.ROUTINE: 0, Importance.NORMAL: 1, Importance.CRITICAL: 2}
REPORT_MAX = 256 * 1024


def report_path(namespace: str, run_id: int) -> str:
    """Where the API serves a run's report (``run.report_url``)."""
    return f"/api/v1/namespaces/{namespace}/runs/{run_id}/report"


async def _log(
    conn: asyncpg.Connection, run_id: int, level: str, message: str, **fields: Any
) -> None:
    await log_run(conn, run_id, level, message, fields)


def _iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


async def run_facts(conn: asyncpg.Connection, run_id: int) -> dict[str, Any]:
    """The run as the templates see it: a snapshot, JSON-ready."""
    r = await conn.fetchrow(
        """SELECT r.id, r.namespace, p.name AS pipeline, v.number AS version, r.status, r.params,
                  r.error_message, r.failed_step, r.triggered_by_kind, r.triggered_by_ref,
                  r.window_start, r.window_end, r.created_at, r.started_at, r.finished_at
           FROM runs r JOIN pipelines p ON p.id = r.pipeline_id
                JOIN pipeline_versions v ON v.id = r.version_id
           WHERE r.id = $1""",
        run_id,
    )
    steps = await conn.fetch(
        """SELECT s.step, s.status, s.items, s.items_succeeded, s.items_failed,
                  (SELECT count(*) FROM step_attempts a WHERE a.run_id = s.run_id AND a.step = s.step
                     AND a.started_at IS NOT NULL) AS attempts
           FROM run_steps s WHERE s.run_id = $1 ORDER BY s.started_at NULLS LAST, s.id""",
        run_id,
    )
    finished = r["finished_at"]
    started = r["started_at"] or r["created_at"]
    return {
        "id": r["id"],
        "namespace": r["namespace"],
        "pipeline": r["pipeline"],
        "version": r["version"],
        "status": r["status"],
        "params": r["params"],
        "error": r["error_message"],
        "failed_step": r["failed_step"],
        "trigger": {"kind": r["triggered_by_kind"], "ref": r["triggered_by_ref"]},
        "window": (
            {"start": _iso(r["window_start"]), "end": _iso(r["window_end"])}
            if r["window_start"] is not None
            else None
        ),
        "created_at": _iso(r["created_at"]),
        "started_at": _iso(r["started_at"]),
        "finished_at": _iso(finished),
        "duration_seconds": (finished - started).total_seconds() if finished else None,
        "steps": [
            {
                "name": s["step"],
                "status": s["status"],
                "items": s["items"],
                "items_succeeded": s["items_succeeded"],
                "items_failed": s["items_failed"],
                "attempts": s["attempts"],
            }
            for s in steps
        ],
        "report_url": None,
    }


async def on_finished(
    conn: asyncpg.Connection, run_id: int, pipeline: Pipeline, status: str
) -> None:
    """The run finished as ``status``: its report, then its alerts. Caller holds the run lock."""
    event = EVENT_OF_STATUS.get(status)
    rules = [a for a in pipeline.spec.alerts if event is not None and _matches(a, event, pipeline)]
    if pipeline.spec.report is None and not rules:
        return
    facts = await run_facts(conn, run_id)
    report = await _store_report(conn, pipeline, facts) if pipeline.spec.report else None
    for rule in rules:
        await raise_alert(conn, run_id, rule, facts, report)


async def raise_stuck(conn: asyncpg.Connection, versions: Any) -> int:
    """RunStuck for runs the sweeper flagged; the unique key makes re-detection harmless."""
    rows = await conn.fetch(
        f"""SELECT r.id, r.version_id FROM runs r
           WHERE r.status = '{RunStatus.RUNNING}' AND r.stuck_at IS NOT NULL
             AND NOT EXISTS (SELECT 1 FROM notifications n
                             WHERE n.run_id = r.id AND n.event = 'run_stuck')
           ORDER BY r.id LIMIT 100"""
    )
    raised = 0
    for row in rows:
        pipeline: Pipeline = await versions.get(conn, row["version_id"])
        rules = [a for a in pipeline.spec.alerts if _matches(a, AlertEvent.RUN_STUCK, pipeline)]
        if not rules:
            continue
        locked = await conn.fetchval(
            f"SELECT id FROM runs WHERE id = $1 AND status = '{RunStatus.RUNNING}' FOR UPDATE SKIP LOCKED",
            row["id"],
        )
        if locked is None:
            continue
        facts = await run_facts(conn, row["id"])
        for rule in rules:
            raised += await raise_alert(conn, row["id"], rule, facts, None)
    return raised


def _matches(alert: Alert, event: AlertEvent, pipeline: Pipeline) -> bool:
    floor = alert.importance
    return alert.event is event and (
        floor is None or _RANK[pipeline.spec.importance] >= _RANK[floor]
    )


async def _store_report(
    conn: asyncpg.Connection, pipeline: Pipeline, facts: dict[str, Any]
) -> str | None:
    source = (pipeline.spec.report and pipeline.spec.report.template) or DEFAULT_REPORT
    try:
        text = render(source, {"run": facts}, REPORT_MAX)
    except RenderError as err:
        await _log(conn, facts["id"], "warning", f"report not rendered: {err}", report=False)
        return None
    data = text.encode()
    await conn.execute(
        """INSERT INTO artifact_refs (run_id, name, content_type, size, digest, inline)
           VALUES ($1, $2, 'text/markdown', $3, $4, $5)""",
        facts["id"],
        REPORT_ARTIFACT,
        len(data),
        hashlib.sha256(data).hexdigest(),
        text,
    )
    facts["report_url"] = report_path(facts["namespace"], facts["id"])
    return text


def _render_or_default(
    source: str | None, default: str, context: dict[str, Any], limit: int
) -> tuple[str, str | None]:
    if source is not None:
        try:
            return render(source, context, limit), None
        except RenderError as err:
            warning = str(err)
            return render(default, context, limit), warning
    return render(default, context, limit), None


async def raise_alert(
    conn: asyncpg.Connection,
    run_id: int,
    rule: Alert,
    facts: dict[str, Any],
    report: str | None,
) -> int:
    """Queue one notification (unless throttled or already raised); 1 when queued."""
    event = rule.event.engine_value
    pipeline_id = await conn.fetchval("SELECT pipeline_id FROM runs WHERE id = $1", run_id)
    if rule.throttle is not None:
        recent = await conn.fetchval(
            """SELECT 1 FROM notifications WHERE pipeline_id = $1 AND rule = $2
               AND created_at > now() - $3::interval LIMIT 1""",
            pipeline_id,
            rule.name,
            rule.throttle.to_timedelta(),
        )
        if recent:
            await _log(
                conn,
                run_id,
                "info",
                f"alert {rule.name} throttled ({rule.throttle})",
                alert=rule.name,
            )
            return 0
    context = {"run": facts, "report": report}
    subject, sw = _render_or_default(rule.subject, DEFAULT_SUBJECT, context, SUBJECT_MAX)
    body, bw = _render_or_default(rule.body, DEFAULT_BODY, context, BODY_MAX)
    for part, warning in (("subject", sw), ("body", bw)):
        if warning is not None:
            await _log(
                conn,
                run_id,
                "warning",
                f"alert {rule.name}: {part} template failed ({warning}); the default {part} was sent instead",
                alert=rule.name,
            )
    snapshot = {"run": facts, "report": report}
    raised = await conn.fetchval(
        """INSERT INTO notifications (run_id, pipeline_id, rule, event, notifier, connection,
                                      subject, body, snapshot, max_attempts)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0)
           ON CONFLICT (run_id, rule, event) DO NOTHING RETURNING id""",
        run_id,
        pipeline_id,
        rule.name,
        event,
        rule.notifier,
        rule.connection,
        subject.strip(),
        body,
        json.loads(json.dumps(snapshot, default=str)),
    )
    if raised is None:
        return 0
    await _log(
        conn,
        run_id,
        "info",
        f"alert {rule.name} queued ({event} via {rule.notifier})",
        alert=rule.name,
        notification=raised,
    )
    return 1


@dataclass(frozen=True)
class Claimed:
    id: int
    run_id: int
    rule: str
    event: str
    notifier: str
    connection: str | None
    subject: str
    body: str
    snapshot: dict[str, Any]
    attempts: int
    max_attempts: int

    @property
    def namespace(self) -> str:
        return str(self.snapshot["run"]["namespace"])


async def claim(
    conn: asyncpg.Connection, owner: str, *, limit: int, lease: dt.timedelta, budget: int
) -> list[Claimed]:
    rows = await conn.fetch(
        f"""
        UPDATE notifications n SET status = 'running', {NOTIFICATIONS.take("$1", "$3")},
               attempts = n.attempts + 1,
               max_attempts = CASE WHEN n.max_attempts = 0 THEN $4 ELSE n.max_attempts END
        WHERE n.id IN (SELECT id FROM notifications WHERE status = 'queued' AND available_at <= now()
                       ORDER BY available_at, id LIMIT $2 FOR UPDATE SKIP LOCKED)
        RETURNING n.id, n.run_id, n.rule, n.event, n.notifier, n.connection, n.subject, n.body,
                  n.snapshot, n.attempts, n.max_attempts
        """,
        owner,
        limit,
        lease,
        budget,
    )
    return [Claimed(**dict(r)) for r in rows]


async def delivered(conn: asyncpg.Connection, n: Claimed, owner: str) -> bool:
    status: str = await conn.execute(
        f"""UPDATE notifications SET status = 'delivered', delivered_at = now(),
                  {NOTIFICATIONS.release()}, last_error = NULL
           WHERE id = $1 AND {NOTIFICATIONS.held_by("$2")} AND status = 'running'""",
        n.id,
        owner,
    )
    if affected(status) != 1:
        return False
    await _log(
        conn,
        n.run_id,
        "info",
        f"alert {n.rule} delivered via {n.notifier} (attempt {n.attempts})",
        alert=n.rule,
        notification=n.id,
    )
    return True


async def failed(
    conn: asyncpg.Connection, n: Claimed, owner: str, error: str, retry_in: dt.timedelta | None
) -> bool:
    """Back to the queue after ``retry_in``, or (None) given up for good."""
    status: str = await conn.execute(
        f"""UPDATE notifications SET status = $3, available_at = now() + COALESCE($4::interval, '0s'),
                  {NOTIFICATIONS.release()}, last_error = $5
           WHERE id = $1 AND {NOTIFICATIONS.held_by("$2")} AND status = 'running'""",
        n.id,
        owner,
        "queued" if retry_in is not None else "failed",
        retry_in,
        error[:2000],
    )
    if affected(status) != 1:
        return False
    if retry_in is not None:
        message = (
            f"alert {n.rule}: delivery via {n.notifier} failed (attempt {n.attempts} of "
            f"{n.max_attempts}): {error}; retrying in {retry_in.total_seconds():.1f}s"
        )
        await _log(conn, n.run_id, "warning", message, alert=n.rule, notification=n.id)
    else:
        message = f"alert {n.rule}: gave up after {n.attempts} attempt(s) via {n.notifier}: {error}"
        await _log(conn, n.run_id, "error", message, alert=n.rule, notification=n.id)
    return True


async def recover(conn: asyncpg.Connection) -> int:
    """Expired leases go back to the queue (or fail, when that was the last attempt)."""
    rows = await conn.fetch(
        f"""UPDATE notifications SET status = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END,
                  {NOTIFICATIONS.release()},
                  last_error = COALESCE(last_error, 'the delivering worker lost its lease')
           WHERE status = 'running' AND {NOTIFICATIONS.expired()} RETURNING id"""
    )
    return len(rows)


async def next_due(conn: asyncpg.Connection) -> dt.datetime | None:
    value: dt.datetime | None = await conn.fetchval(
        "SELECT min(available_at) FROM notifications WHERE status = 'queued'"
    )
    return value
