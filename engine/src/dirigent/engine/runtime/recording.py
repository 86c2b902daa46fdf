"""Recording what workers report, so that a write the database refuses never loops.

A worker's writer records a batch of outcomes and parkings in one transaction. Two things
could make that transaction fail for good, and both used to re-execute every attempt in the
batch when their leases expired:

- a value PostgreSQL cannot store (a NUL character). ``storable`` finds it before the write:
  an output, input or handle holding one fails that attempt alone
  (``engine.value.unstorable``, rejected); free text is escaped and kept.
- anything else deterministic. ``record`` splits a failed batch and records each entry on its
  own; an entry that still fails for a data error is recorded as a bare failure. Whatever is
  left unrecorded keeps its lease, and the sweeper's recovery bound ends it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from dirigent.engine.shapes.attempts import LogLine, Outcome, Parking
from dirigent.engine.shapes.storable import storable_text, storable_value, unstorable_path
from dirigent.engine.store.pool import UNSTORABLE_ERRORS, Connection, Pool, in_transaction
from dirigent.engine.store.transactions import counting
from dirigent.engine.store.transactions.outcomes import RecordResult, will_retry
from dirigent.engine.store.transactions.versions import VersionCache
from dirigent.sdk import ErrorClass

log = structlog.get_logger("dirigent.worker")

UNSTORABLE = "engine.value.unstorable"
Entry = Outcome | Parking
Writer = Callable[[Connection, list[Outcome], list[Parking]], Awaitable[Any]]
Written = tuple[
    set[int], dict[int, RecordResult]
]  # a writer's result: parked ids, recorded outcomes


def _where(*path: str | int) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def unstorable_failure(entry: Entry, worker_id: str, what: str) -> Outcome:
    """The attempt fails alone: something it produced cannot be stored."""
    message = f"{what} holds a NUL character (or a lone surrogate), which cannot be stored"
    return Outcome(
        entry.attempt,
        worker_id,
        "failed",
        error_class=str(ErrorClass.REJECTED),
        error_code=UNSTORABLE,
        error_message=message,
        error_params={"at": what},
        logs=[LogLine("error", f"failed: {message}", {"code": UNSTORABLE})],
    )


def _logs(lines: list[LogLine]) -> list[LogLine]:
    return [LogLine(ln.level, storable_text(ln.message), storable_value(ln.fields)) for ln in lines]


def storable(entry: Entry, worker_id: str) -> Entry:
    """The entry as it can be written: free text escaped, an unstorable value a failure."""
    if isinstance(entry, Parking):
        for name in ("handle", "cursor"):
            bad = unstorable_path(getattr(entry, name), name)
            if bad is not None:
                return unstorable_failure(entry, worker_id, _where(*bad))
        return dataclasses.replace(
            entry,
            message=None if entry.message is None else storable_text(entry.message),
            input=storable_value(entry.input),
            logs=_logs(entry.logs),
        )
    inline = entry.artifact.inline if entry.artifact is not None else None
    for name, value in (("output", entry.output), ("output", inline)):
        bad = unstorable_path(value, name)
        if bad is not None:
            return unstorable_failure(entry, worker_id, _where(*bad))
    return dataclasses.replace(
        entry,
        input=storable_value(entry.input),
        error_message=None if entry.error_message is None else storable_text(entry.error_message),
        error_params=storable_value(entry.error_params),
        logs=_logs(entry.logs),
    )


async def record(
    pool: Pool,
    write: Writer,
    worker_id: str,
    outcomes: list[Outcome],
    parkings: list[Parking],
) -> list[tuple[Entry, Any]]:
    """Write the batch; on failure, each entry alone. Returns (entry written, write's result).

    An entry whose write fails is left out: its lease stays with this worker and expires.
    """
    if not outcomes and not parkings:
        return []  # a batch its count took whole: no empty transaction (two round trips)

    async def one(o: list[Outcome], p: list[Parking]) -> Any:
        return await in_transaction(pool, lambda conn: write(conn, o, p))

    try:
        result = await one(outcomes, parkings)
        return [(e, result) for e in _entries(outcomes, parkings)]
    except Exception:
        if len(outcomes) + len(parkings) == 1:
            return await _alone(one, worker_id, (outcomes or parkings)[0])
        log.exception("attempt.batch_write_failed", attempts=len(outcomes) + len(parkings))
    written: list[tuple[Entry, Any]] = []
    for entry in _entries(outcomes, parkings):
        written += await _alone(one, worker_id, entry)
    return written


def _entries(outcomes: list[Outcome], parkings: list[Parking]) -> list[Entry]:
    return [*outcomes, *parkings]


async def _alone(
    one: Callable[[list[Outcome], list[Parking]], Awaitable[Any]], worker_id: str, entry: Entry
) -> list[tuple[Entry, Any]]:
    try:
        if isinstance(entry, Outcome):
            return [(entry, await one([entry], []))]
        return [(entry, await one([], [entry]))]
    except UNSTORABLE_ERRORS:
        log.exception("attempt.write_refused", attempt_id=entry.attempt.id)
    except Exception:
        log.exception("attempt.write_failed", attempt_id=entry.attempt.id)
        return []
    bare = unstorable_failure(entry, worker_id, "a value")
    try:
        return [(bare, await one([bare], []))]
    except Exception:
        log.exception("attempt.write_failed", attempt_id=entry.attempt.id)
        return []


def countable(outcome: Outcome, versions: VersionCache) -> bool:
    """An item's outcome that will not retry: counted without its run's lock (``count_items``)."""
    pipeline = versions.peek(outcome.attempt.version_id)
    return (
        outcome.attempt.run_item_id is not None
        and pipeline is not None
        and not will_retry(outcome, pipeline)
    )


async def count_items(
    pool: Pool, versions: VersionCache, worker_id: str, outcomes: list[Outcome]
) -> list[tuple[Entry, Written]] | None:
    """Count ``countable`` outcomes in autocommit, then finish the steps they end.

    None when the count failed (nothing was written: the caller records the batch the usual
    way). A finish that fails after the count is left to the sweeper (``counting``).
    """
    try:
        async with pool.acquire() as conn:
            accepted, counters = await counting.count(conn, outcomes, worker_id)
            ended = await counting.ended(conn, counters, versions)
    except Exception:
        log.exception("attempt.count_failed", attempts=len(outcomes))
        return None
    runs: dict[int, str] = {}
    if ended:
        try:
            runs = await in_transaction(
                pool, lambda conn: counting.finish_counted(conn, ended, versions)
            )
        except Exception:
            log.exception("step.finish_failed", steps=[s for _, _, s in ended])
    recorded = {
        o.attempt.id: RecordResult(run_status=runs.get(o.attempt.run_id))
        if o.attempt.id in accepted
        else RecordResult(discarded=True)
        for o in outcomes
    }
    return [(o, (set(), recorded)) for o in outcomes]
