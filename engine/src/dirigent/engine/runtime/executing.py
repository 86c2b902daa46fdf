"""Running one claimed attempt: resolve, validate, call the block, and say what happened.

Nothing here writes to the database (but for the fetched result, through the hook the
worker gives); it turns a claimed attempt into either an ``Outcome`` (to record) or a
``Parking`` (to wait again). The worker owns the transactions. Errors are
classified by the block (``classify_error``) into transient / rejected / unknown, which is
all the retry policy reads.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from dirigent.engine.infrastructure.artifacts import ArtifactStore
from dirigent.engine.infrastructure.crypto import SecretSealer
from dirigent.engine.infrastructure.plugins import BlockEntry, Catalog
from dirigent.engine.infrastructure.trigger_metrics import RunMetrics
from dirigent.engine.rules.resolving import (
    NO_ITEM,
    Scope,
    UnmatchedItem,
    UnresolvedReference,
    resolve,
)
from dirigent.engine.runtime.child_runs import StepRuns
from dirigent.engine.runtime.connecting import Opened, Unopenable, open_declared
from dirigent.engine.runtime.context import (
    EngineContext,
    deadline_of,
    storage_connection,
    timeout_of,
)
from dirigent.engine.runtime.redacting import redacted
from dirigent.engine.shapes.attempts import Artifact, Claimed, LogLine, Outcome, Parking
from dirigent.engine.shapes.manifests.enums import TimeoutOutcome
from dirigent.engine.shapes.manifests.pipeline import Pipeline, Step
from dirigent.engine.shapes.manifests.references import Reference, StepPart, find_references
from dirigent.engine.store.queries.upstream import read_upstream
from dirigent.sdk import BlockFailure, ErrorClass, NotYet, Operator, RemoteHandle, Sensor

T = TypeVar("T")
FetchedHook = Callable[[Claimed, Any], Awaitable[None]]
GONE_LIMIT = 3  # consecutive GONE probes before a vanished remote job fails the attempt
PROBE_ERROR_LIMIT = 5  # consecutive probe/fetch errors before the job is given up as lost
PROBE_BACKOFF_MAX = dt.timedelta(minutes=5)
DEADLINE_MARGIN = dt.timedelta(milliseconds=10)  # look again just after the deadline, not at it


class CallTimedOut(Exception):
    """The engine's bound on a block call expired (a TimeoutError the block raises is its own)."""

    def __init__(self, call: str, limit: float) -> None:
        super().__init__(f"{call} did not return within {limit:g}s")
        self.call = call


async def bounded(call: str, work: Awaitable[T], limit: float | None) -> T:
    """Await a block call under the engine's bound, telling its expiry from the block's own."""
    try:
        async with asyncio.timeout(limit) as scope:
            return await work
    except TimeoutError:
        if scope.expired():
            raise CallTimedOut(call, limit or 0.0) from None
        raise


@dataclass(frozen=True)
class Settings:
    """What executing needs from the process's settings."""

    enabled_unsafe: frozenset[str]
    inline_artifact_max: int
    sealer: SecretSealer | None = None
    runs_started: RunMetrics | None = None  # child runs (``pipeline.run``) are counted here


def failure(
    attempt: Claimed,
    worker_id: str,
    error_class: ErrorClass | str,
    code: str,
    message: str,
    *,
    params: dict[str, Any] | None = None,
    input: Any = None,
    logs: list[LogLine] | None = None,
    duration_ms: int = 0,
) -> Outcome:
    lines = list(logs or [])
    lines.append(
        LogLine(
            "error",
            f"failed: {message}",
            {"duration_ms": duration_ms, "error_class": str(error_class), "code": code},
        )
    )
    return Outcome(
        attempt,
        worker_id,
        "failed",
        input=input,
        error_class=str(error_class),
        error_code=code,
        error_message=message,
        error_params=params or {},
        logs=lines,
    )


async def upstream_scope(
    conn_factory: Any, a: Claimed, pipeline: Pipeline, step: Step, storage: ArtifactStore
) -> Scope:
    """The values this attempt's references may read, fetched only for the steps it names."""
    scope = Scope(
        params=a.params,
        run_id=a.run_id,
        scratch=storage.run_prefix(a.namespace, a.run_id),
        artifacts=storage.namespace_root(a.namespace),
        window=a.window,
        item=a.item_value if a.run_item_id is not None else NO_ITEM,
        item_index=a.item_index,
    )
    whole, paired = _wanted(step)
    if not whole and not paired:
        return scope
    async with conn_factory() as conn:
        up = await read_upstream(
            conn, a.run_id, whole=whole, paired=paired, item_index=a.item_index
        )
    scope.outputs, scope.fan_outs, scope.grids = up.outputs, up.fan_outs, up.grids
    return scope


def _wanted(step: Step) -> tuple[set[str], set[str]]:
    """Steps read whole, and steps read only at the paired item."""
    whole: set[str] = set()
    paired: set[str] = set()
    # forEach is not read here: the grid was drawn at creation and the attempt carries its item.
    for _, ref in find_references(step.config):
        if isinstance(ref, Reference) and ref.step is not None:
            (paired if ref.part is StepPart.ITEM_OUTPUT else whole).add(ref.step)
    return whole, paired


def _artifact(name: str, output: Any, settings: Settings) -> tuple[Artifact, bytes]:
    data = json.dumps(output, sort_keys=True, separators=(",", ":")).encode()
    art = Artifact(name, "application/json", len(data), hashlib.sha256(data).hexdigest())
    if len(data) <= settings.inline_artifact_max:
        art.inline = output
    return art, data


async def succeed(
    a: Claimed,
    worker_id: str,
    output: BaseModel,
    ctx: EngineContext,
    started: float,
    storage: ArtifactStore,
    settings: Settings,
    input: Any,
) -> Outcome:
    value = output.model_dump(mode="json")
    art, data = _artifact("output", value, settings)
    if art.inline is None:
        art.uri = f"{storage.run_prefix(a.namespace, a.run_id)}/steps/{a.step}/{a.id}/output.json"
        await storage.write_bytes(art.uri, data, art.content_type)
    duration_ms = int((time.monotonic() - started) * 1000)
    logs = [
        *ctx.log.lines,
        LogLine("info", "finished", {"duration_ms": duration_ms, "output_bytes": art.size}),
    ]
    return Outcome(a, worker_id, "succeeded", input=input, output=value, artifact=art, logs=logs)


def _poll(step: Step, entry: BlockEntry) -> dt.timedelta:
    if step.poll is not None:
        return step.poll.to_timedelta()
    return entry.block.spec.default_poll.to_timedelta()


def _next_poll(
    a: Claimed, step: Step, entry: BlockEntry, deadline: dt.timedelta | None
) -> dt.timedelta:
    """The poll interval, but never past the deadline: the attempt is looked at again then."""
    poll = _poll(step, entry)
    if deadline is None:
        return poll
    left = deadline - (dt.datetime.now(dt.UTC) - a.first_started_at)
    return max(min(poll, left + DEADLINE_MARGIN), dt.timedelta(0))


@dataclass(frozen=True)
class _Call:
    """One attempt, prepared for its block call: what every step of running it reads."""

    a: Claimed
    worker_id: str
    step: Step
    entry: BlockEntry
    config: BaseModel
    resolved: Any
    ctx: EngineContext
    started: float
    storage: ArtifactStore
    settings: Settings
    on_fetched: FetchedHook

    def fail(
        self, error_class: ErrorClass | str, code: str, message: str, *, timed: bool = False
    ) -> Outcome:
        """A failure carrying the call's input and logs (and its duration when ``timed``)."""
        duration_ms = int((time.monotonic() - self.started) * 1000) if timed else 0
        return failure(
            self.a,
            self.worker_id,
            error_class,
            code,
            message,
            input=self.resolved if timed else None,
            logs=self.ctx.log.lines,
            duration_ms=duration_ms,
        )

    async def succeed(self, output: BaseModel) -> Outcome:
        return await succeed(
            self.a,
            self.worker_id,
            output,
            self.ctx,
            self.started,
            self.storage,
            self.settings,
            self.resolved,
        )


async def execute_attempt(
    conn_factory: Any,
    a: Claimed,
    *,
    worker_id: str,
    pipeline: Pipeline,
    catalog: Catalog,
    storage: ArtifactStore,
    settings: Settings,
    on_fetched: FetchedHook,
) -> Outcome | Parking:
    """Run one claimed attempt: refuse it, prepare its call, call its block, classify errors."""
    step = pipeline.spec.steps[a.step]
    started = time.monotonic()
    entry = catalog.block(a.block)
    if entry is None:
        return failure(
            a,
            worker_id,
            ErrorClass.REJECTED,
            "engine.block.missing",
            f"block '{a.block}' is not installed on worker {worker_id}",
        )
    if entry.local_execution and a.block not in settings.enabled_unsafe:
        return failure(
            a,
            worker_id,
            ErrorClass.REJECTED,
            "engine.block.unsafe_disabled",
            f"block '{a.block}' executes code on workers and is not enabled here "
            "(DIRIGENT_ENABLED_UNSAFE_BLOCKS)",
        )
    scope = await upstream_scope(conn_factory, a, pipeline, step, storage)
    configured = _configure(a, worker_id, entry, step, scope)
    if isinstance(configured, Outcome):
        return configured
    resolved, config = configured
    connections = await _open_connections(conn_factory, a, worker_id, entry, resolved, settings)
    if isinstance(connections, Outcome):
        return connections
    ctx = _context(
        conn_factory, a, (step, entry), catalog, settings, storage, connections, resolved
    )
    call = _Call(
        a, worker_id, step, entry, config, resolved, ctx, started, storage, settings, on_fetched
    )
    secrets = connections.secrets if isinstance(connections, Opened) else frozenset()
    try:
        return redacted(await _call_block(call), secrets)
    except asyncio.CancelledError:
        raise
    except Exception as err:
        return redacted(_classified(call, err), secrets)
    except BaseException as err:
        # A block's BaseException ends its attempt, never the worker: left to propagate, it
        # took the worker down and the attempt went back to the queue to take the next
        # worker down too.
        return redacted(_crashed(call, err), secrets)


def _configure(
    a: Claimed, worker_id: str, entry: BlockEntry, step: Step, scope: Scope
) -> tuple[Any, BaseModel] | Outcome:
    """The step's config with its references resolved and validated by the block's model."""
    try:
        resolved = resolve(step.config, scope)
    except UnmatchedItem as err:
        return Outcome(a, worker_id, "skipped", logs=[LogLine("info", f"skipped: {err}")])
    except UnresolvedReference as err:
        return failure(
            a,
            worker_id,
            ErrorClass.REJECTED,
            err.code,
            str(err),
            params={"reference": err.reference},
        )
    try:
        return resolved, entry.block.config_model.model_validate(resolved)
    except ValidationError as err:
        return failure(
            a,
            worker_id,
            ErrorClass.REJECTED,
            "engine.config.invalid",
            f"config does not fit block '{a.block}': {err.errors(include_url=False)[0]['msg']}",
            input=resolved,
        )


async def _open_connections(
    conn_factory: Any,
    a: Claimed,
    worker_id: str,
    entry: BlockEntry,
    resolved: Any,
    settings: Settings,
) -> dict[str, dict[str, Any]] | Outcome:
    """The connections the step's config names in its block's declared connection fields,
    opened here on the worker path for this attempt only (see ``runtime.connecting``)."""
    try:
        return await open_declared(
            conn_factory, entry.block.spec, resolved, a.namespace, settings.sealer
        )
    except Unopenable as err:
        return failure(
            a,
            worker_id,
            ErrorClass.REJECTED,
            "engine.connection.unopenable",
            str(err),
            input=resolved,
        )


def _context(
    conn_factory: Any,
    a: Claimed,
    limits: tuple[Step, BlockEntry],
    catalog: Catalog,
    settings: Settings,
    storage: ArtifactStore,
    connections: dict[str, dict[str, Any]],
    resolved: Any,
) -> EngineContext:
    return EngineContext(
        connections=connections,
        runs=_step_runs(conn_factory, a, catalog, settings),
        namespace=a.namespace,
        pipeline=a.pipeline,
        run_id=a.run_id,
        step=a.step,
        attempt=a.number,
        attempt_id=a.id,
        run_item_id=a.run_item_id,
        item=a.item_value,
        started_at=a.first_started_at,
        cursor=a.cursor,
        params=a.params,
        storage=storage,
        storage_connection=storage_connection(resolved, connections),
        timeout=timeout_of(limits[0]),
        deadline=deadline_of(limits[0], limits[1].block, a.first_started_at),
    )


async def _call_block(call: _Call) -> Outcome | Parking:
    block = call.entry.block
    if isinstance(block, Sensor):
        return await _poke(call, block)
    assert isinstance(block, Operator)
    if call.a.handle is not None:
        return await _probe(call, block)
    return await _submit(call, block)


CRASHED = "crashed"  # the error class of an attempt whose block raised a BaseException


def _crashed(call: _Call, err: BaseException) -> Outcome:
    """A failed outcome, never retried by the policy (only transient and unknown are)."""
    call.ctx.log.error(
        f"the block raised {type(err).__name__}; the attempt fails, the worker goes on"
    )
    return call.fail(
        CRASHED,
        "engine.block.crashed",
        f"the block raised {type(err).__name__} ({err!s:.200}), which ends a process, not a "
        "step: the attempt failed and the worker went on (raise an Exception instead)",
        timed=True,
    )


def _classified(call: _Call, err: Exception) -> Outcome:
    """A block call that raised, classified: the engine's timeout, a BlockFailure, or the
    block's own ``classify_error`` for anything else."""
    if isinstance(err, CallTimedOut):
        return call.fail(
            ErrorClass.TRANSIENT,
            "engine.step.timeout",
            f"the step did not finish within its timeout {call.step.timeout}",
            timed=True,
        )
    if isinstance(err, BlockFailure):
        return failure(
            call.a,
            call.worker_id,
            err.error_class,
            err.code,
            err.message,
            params=err.params,
            input=call.resolved,
            logs=call.ctx.log.lines,
            duration_ms=int((time.monotonic() - call.started) * 1000),
        )
    return call.fail(
        call.entry.block.classify_error(err),
        "engine.block.error",
        f"{type(err).__name__}: {err}",
        timed=True,
    )


def _timeout(step: Step) -> float | None:
    return step.timeout.total_seconds() if step.timeout is not None else None


async def _poke(call: _Call, block: Sensor[Any, Any]) -> Outcome | Parking:
    """A sensor: past its deadline it skips or fails; else poke, and park on NotYet."""
    a, step = call.a, call.step
    deadline = step.deadline or block.spec.default_deadline
    if dt.datetime.now(dt.UTC) - a.first_started_at >= deadline.to_timedelta():
        if step.on_timeout is TimeoutOutcome.SKIP:
            return Outcome(
                a,
                call.worker_id,
                "skipped",
                input=call.resolved,
                logs=[LogLine("warning", f"deadline {deadline} passed; skipped (onTimeout: Skip)")],
            )
        return failure(
            a,
            call.worker_id,
            ErrorClass.REJECTED,
            "engine.sensor.deadline",
            f"the condition did not hold within the deadline {deadline}",
            input=call.resolved,
        )
    result = await bounded("poke", block.poke(call.config, call.ctx), _timeout(step))
    if not isinstance(result, NotYet):
        return await call.succeed(result)
    logs = call.ctx.log.lines
    if result.message and result.message != a.wait_message:
        logs = [*logs, LogLine("info", result.message, {"progress": result.progress})]
    return Parking(
        a,
        _next_poll(a, step, call.entry, deadline.to_timedelta()),
        cursor=result.cursor,
        message=result.message,
        progress=result.progress,
        input=call.resolved,
        logs=logs,
    )


async def _submit(call: _Call, block: Operator[Any, Any]) -> Outcome | Parking:
    """An operator's first call: it returns the output, or a handle to park on."""
    result = await bounded("execute", block.execute(call.config, call.ctx), _timeout(call.step))
    if not isinstance(result, RemoteHandle):
        return await call.succeed(result)
    return Parking(
        call.a,
        _next_poll(call.a, call.step, call.entry, _deadline_of(call.step)),
        handle=result.model_dump(mode="json"),
        input=call.resolved,
        logs=[
            *call.ctx.log.lines,
            LogLine("info", f"submitted: {result.ref}", {"ref": result.ref}),
        ],
    )


def _step_runs(conn_factory: Any, a: Claimed, catalog: Catalog, settings: Settings) -> StepRuns:
    # No cancel_remotes here: a child cancelled from this path (a remote deadline) has its
    # remote work told by the sweeper's pass over owed remote cancels.
    return StepRuns(
        conn_factory,
        catalog=catalog,
        namespace=a.namespace,
        run_id=a.run_id,
        step=a.step,
        attempt_id=a.id,
        enabled_unsafe=settings.enabled_unsafe,
        metrics=settings.runs_started,
    )


async def _probe(call: _Call, block: Operator[Any, Any]) -> Outcome | Parking:
    """A submitted job: record a replayed fetch, enforce the deadline, else probe it."""
    a, step = call.a, call.step
    assert a.handle is not None
    handle = RemoteHandle.model_validate(a.handle)
    if a.fetched is not None:
        # A replay: fetch already ran and its result was committed; record from it.
        return await call.succeed(block.output_model.model_validate(a.fetched))
    if _past_deadline(a, step):
        return await _deadline_failure(call, block, handle)
    try:
        result = await bounded(
            "probe", block.probe(handle, call.config, call.ctx), _remote_limit(a, step)
        )
    except asyncio.CancelledError:
        raise
    except Exception as err:
        return await _probe_error(call, block, handle, "probe", err)
    status = str(result.status)
    if status == "running":
        if result.meta is not None:
            handle = handle.model_copy(update={"meta": result.meta})
        return Parking(
            a,
            _next_poll(a, step, call.entry, _deadline_of(step)),
            handle=handle.model_dump(mode="json"),
            message=result.message,
            progress=result.progress,
            logs=call.ctx.log.lines,
        )
    if status == "succeeded":
        if result.meta is not None:
            handle = handle.model_copy(update={"meta": result.meta})
        return await _fetch(call, block, handle)
    if status == "gone":
        return _gone(call, handle, result.message)
    return call.fail(
        result.error_class or ErrorClass.UNKNOWN,
        "engine.remote.failed",
        result.message or f"remote job {handle.ref} failed",
    )


async def _fetch(call: _Call, block: Operator[Any, Any], handle: RemoteHandle) -> Outcome | Parking:
    """The job succeeded: fetch its output, commit it, then record from it."""
    try:
        output = await bounded(
            "fetch", block.fetch(handle, call.config, call.ctx), _remote_limit(call.a, call.step)
        )
    except asyncio.CancelledError:
        raise
    except Exception as err:
        return await _probe_error(call, block, handle, "fetch", err)
    # Committed in its own transaction before the outcome: a worker dying between the
    # two leaves a replay that records from this instead of fetching again.
    await call.on_fetched(call.a, output.model_dump(mode="json"))
    return await call.succeed(output)


def _gone(call: _Call, handle: RemoteHandle, message: str | None) -> Outcome | Parking:
    """The remote no longer knows the job: look again, up to ``GONE_LIMIT`` probes in a row."""
    a = call.a
    count = a.gone_count + 1
    if count >= GONE_LIMIT:
        return call.fail(
            ErrorClass.TRANSIENT,
            "engine.remote.gone",
            f"the remote system no longer knows job {handle.ref} ({count} probes)",
        )
    return Parking(
        a,
        _next_poll(a, call.step, call.entry, _deadline_of(call.step)),
        handle=a.handle,
        gone_count=count,
        probe_errors=a.probe_errors,
        message=message,
        logs=call.ctx.log.lines,
    )


async def _probe_error(
    call: _Call, block: Operator[Any, Any], handle: RemoteHandle, what: str, err: Exception
) -> Outcome | Parking:
    """A probe or fetch that raised: the remote job may still run, so its handle is kept.

    The attempt parks again with a growing delay; after ``PROBE_ERROR_LIMIT`` consecutive
    errors the job is given up as lost: the remote is told to cancel, and the attempt fails
    transient (a retry then submits afresh, beside no abandoned job).
    """
    a, step, ctx = call.a, call.step, call.ctx
    if _past_deadline(a, step):  # the call hung until the deadline went by
        return await _deadline_failure(call, block, handle)
    count = a.probe_errors + 1
    reason = f"{type(err).__name__}: {err}"
    if count >= PROBE_ERROR_LIMIT:
        await _cancel_remote(block, handle, call.config, ctx, step)
        return call.fail(
            ErrorClass.TRANSIENT,
            "engine.remote.lost",
            f"{what} of remote job {handle.ref} failed {count} times in a row ({reason}); "
            "the job was cancelled",
        )
    poll = _poll(step, call.entry)
    delay = min(poll * (2 ** (count - 1)), max(PROBE_BACKOFF_MAX, poll))
    ctx.log.warning(
        f"{what} of remote job {handle.ref} failed ({reason}); probing again in "
        f"{delay.total_seconds():.1f}s ({count}/{PROBE_ERROR_LIMIT})"
    )
    return Parking(
        a,
        delay,
        handle=handle.model_dump(mode="json"),
        gone_count=a.gone_count,
        probe_errors=count,
        message=a.wait_message,
        logs=ctx.log.lines,
    )


def _deadline_of(step: Step) -> dt.timedelta | None:
    return step.deadline.to_timedelta() if step.deadline is not None else None


def _deadline_left(a: Claimed, step: Step) -> float | None:
    """Seconds until the step's deadline (counted from the attempt's first start), if it has one."""
    if step.deadline is None:
        return None
    spent = (dt.datetime.now(dt.UTC) - a.first_started_at).total_seconds()
    return step.deadline.to_timedelta().total_seconds() - spent


def _past_deadline(a: Claimed, step: Step) -> bool:
    left = _deadline_left(a, step)
    return left is not None and left <= 0


def _remote_limit(a: Claimed, step: Step) -> float:
    """A probe or fetch is bounded by the step's timeout (or a default) and by its deadline."""
    left = _deadline_left(a, step)
    limit = _remote_timeout(step)
    return limit if left is None else max(min(limit, left), 0.0)


async def _deadline_failure(
    call: _Call, block: Operator[Any, Any], handle: RemoteHandle
) -> Outcome:
    """The work is abandoned, so the remote is told to stop (best-effort): a retry must not
    run beside a job nobody is waiting for any more."""
    await _cancel_remote(block, handle, call.config, call.ctx, call.step)
    return call.fail(
        ErrorClass.TRANSIENT,
        "engine.remote.deadline",
        f"remote job {handle.ref} did not finish within the deadline {call.step.deadline}",
    )


async def _cancel_remote(
    block: Operator[Any, Any],
    handle: RemoteHandle,
    config: BaseModel,
    ctx: EngineContext,
    step: Step,
) -> None:
    """Tell the remote to stop, best-effort and bounded: a failure here is logged, not raised."""
    try:
        await bounded("cancel", block.cancel(handle, config, ctx), _remote_timeout(step))
    except asyncio.CancelledError:
        raise
    except Exception as err:
        ctx.log.warning(f"cancelling remote job {handle.ref} failed: {type(err).__name__}: {err}")


REMOTE_CALL_TIMEOUT = 60.0  # seconds for a probe, fetch or cancel when the step sets none


def _remote_timeout(step: Step) -> float:
    return step.timeout.total_seconds() if step.timeout is not None else REMOTE_CALL_TIMEOUT
