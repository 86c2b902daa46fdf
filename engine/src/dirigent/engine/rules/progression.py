"""Step progression: which steps become ready or skipped, and what a finished run is.

Pure functions over a pinned pipeline and the steps' current states, so the rules are unit
tested without a database and the outcome transaction (``store.outcomes``) only applies
what they decide. Readiness is decided when a prerequisite finishes — never by the claim
query — so claiming stays a plain indexed lookup.

Trigger rules are Airflow's (a step with no dependencies is ready at once):

- ``AllSuccess``: every dependency succeeded. One that failed (or is itself
  ``upstream_failed``) makes the step ``upstream_failed`` at once; otherwise, once all are
  terminal, one skipped (or cancelled) makes it skipped. Both propagate.
- ``AllDone``: every dependency is terminal, whatever it ended as.
- ``OneFailed``: ready the moment one dependency failed or is ``upstream_failed``; skipped
  once all are terminal and none did. Error-handler branches are drawn this way.
- ``Always``: every dependency is terminal, whatever it ended as. Unlike Airflow's "at any
  time", it waits, so a reference to an upstream's output is always finished when read.

A ``continueOnFailure`` step that failed reads as succeeded to its dependents.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from dirigent.engine.shapes.manifests.enums import ItemFailurePolicy, TriggerRule
from dirigent.engine.shapes.manifests.pipeline import Pipeline, Step
from dirigent.engine.shapes.statuses import WORK_TERMINAL

FAILED = frozenset({"failed", "upstream_failed"})


class Decision(enum.StrEnum):
    WAIT = "wait"
    READY = "ready"
    SKIP = "skip"
    UPSTREAM_FAILED = "upstream_failed"


@dataclass(frozen=True)
class StepState:
    status: str  # pending | running | succeeded | failed | skipped | cancelled
    with_errors: bool = False


def effective(step: Step, state: StepState) -> str | None:
    """The outcome dependents see, or None while the step has not finished."""
    if state.status not in WORK_TERMINAL:
        return None
    if state.status == "failed" and step.continue_on_failure:
        return "succeeded"
    return state.status


def decide(rule: TriggerRule, outcomes: list[str | None]) -> Decision:
    if not outcomes:
        return Decision.READY
    done = all(o is not None for o in outcomes)
    failed = any(o in FAILED for o in outcomes)
    if rule is TriggerRule.ALL_SUCCESS:
        if failed:
            return Decision.UPSTREAM_FAILED
        if not done:
            return Decision.WAIT  # a skip waits: an upstream still running may yet fail
        skipped = any(o in ("skipped", "cancelled") for o in outcomes)
        return Decision.SKIP if skipped else Decision.READY
    if rule is TriggerRule.ONE_FAILED:
        if failed:
            return Decision.READY
        return Decision.SKIP if done else Decision.WAIT
    return Decision.READY if done else Decision.WAIT  # AllDone, Always


@dataclass
class Advance:
    """What progression decided for pending steps."""

    ready: list[str]
    skipped: list[str]
    upstream_failed: list[str]


def advance(pipeline: Pipeline, states: Mapping[str, StepState]) -> Advance:
    """Steps to queue, to skip and to mark upstream_failed now, propagated to a fixpoint."""
    steps = pipeline.spec.steps
    current = dict(states)
    out = Advance([], [], [])
    changed = True
    while changed:
        changed = False
        for name in sorted(steps):
            if current[name].status != "pending":
                continue
            step = steps[name]
            outcomes = [effective(steps[d], current[d]) for d in step.depends_on]
            decision = decide(step.rule, outcomes)
            if decision is Decision.READY:
                out.ready.append(name)
                current[name] = StepState("running")
            elif decision is Decision.WAIT:
                continue
            else:
                skip = decision is Decision.SKIP
                (out.skipped if skip else out.upstream_failed).append(name)
                current[name] = StepState("skipped" if skip else "upstream_failed")
                changed = True  # a skip may finish a dependent's rule
    return out


def fan_out_outcome(
    policy: ItemFailurePolicy, total: int, succeeded: int, failed: int, skipped: int, cancelled: int
) -> tuple[str | None, bool]:
    """A fan-out step's status from its item counts, and whether it carries errors.

    None while items are still open. FailFast fails the step on the first failed item;
    Continue succeeds with errors as long as one item succeeded.
    """
    if total == 0:
        return "skipped", False
    if policy is ItemFailurePolicy.FAIL_FAST and failed:
        return "failed", False
    if succeeded + failed + skipped + cancelled < total:
        return None, False
    if succeeded:
        return "succeeded", failed > 0
    if failed:
        return "failed", False
    if cancelled:
        return "cancelled", False
    return "skipped", False


def failed_step(
    pipeline: Pipeline, states: Mapping[str, StepState], order: list[str]
) -> str | None:
    """The step whose failure failed the run: the first in ``order`` that failed, not tolerated."""
    steps = pipeline.spec.steps
    return next((n for n in order if effective(steps[n], states[n]) == "failed"), None)


def run_outcome(pipeline: Pipeline, states: Mapping[str, StepState]) -> str | None:
    """The run's terminal status once every step has finished, else None."""
    steps = pipeline.spec.steps
    if any(s.status not in WORK_TERMINAL for s in states.values()):
        return None
    outcomes = {n: effective(steps[n], s) for n, s in states.items()}
    if any(o == "failed" for o in outcomes.values()):
        return "failed"
    if all(o == "cancelled" for o in outcomes.values()):
        return "cancelled"
    tolerated = any(
        s.with_errors or (s.status == "failed" and steps[n].continue_on_failure)
        for n, s in states.items()
    )
    return "completed_with_errors" if tolerated else "succeeded"
