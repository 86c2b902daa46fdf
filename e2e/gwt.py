"""Given / When / Then helpers for e2e tests.

Why: e2e tests should read as the behaviour they prove, and when they fail they should say
what the cluster saw. Usage::

    given.manifest("examples/hello.yaml").when.applied().then.condition("Ready", timeout=10)
    given.objects(job).when.applied().then.field("status.succeeded", equals=1)
    given.objects(bad).when.applied_expecting_refusal().then.refused_because("steps")

Every wait polls the live object; on timeout the AssertionError carries the object's YAML
and its Events. Objects without a namespace are applied into the test's namespace.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e.harness.binaries import REPO_ROOT
from e2e.kubectl import Kubectl, KubectlError
from tests.support.waiting import WaitTimedOut, wait_until

Obj = dict[str, Any]
DEFAULT_TIMEOUT = 30.0
_POLL = 0.25


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING: Any = _Missing()


def dig(obj: Any, path: str) -> Any:
    """``dig(pod, "status.containerStatuses[0].state")``; MISSING when any step is absent."""
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        if part.startswith("["):
            idx = int(part[1:-1])
            if not isinstance(obj, list) or idx >= len(obj):
                return MISSING
            obj = obj[idx]
        else:
            if not isinstance(obj, dict) or part not in obj:
                return MISSING
            obj = obj[part]
    return obj


@dataclass(frozen=True)
class Ref:
    """Enough to find one applied object again."""

    api_version: str
    kind: str
    name: str
    namespace: str | None

    @classmethod
    def of(cls, obj: Obj) -> Ref:
        meta = obj.get("metadata", {})
        return cls(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))

    def stub(self) -> str:
        meta: Obj = {"name": self.name}
        if self.namespace:
            meta["namespace"] = self.namespace
        return yaml.safe_dump({"apiVersion": self.api_version, "kind": self.kind, "metadata": meta})

    def __str__(self) -> str:
        where = f" in namespace {self.namespace}" if self.namespace else ""
        return f"{self.kind}/{self.name}{where}"


class Given:
    """Entry point, bound to a cluster and the test's namespace (the ``given`` fixture)."""

    def __init__(self, kubectl: Kubectl, namespace: str) -> None:
        self.kubectl = kubectl
        self.namespace = namespace

    def manifest(self, path: str | Path) -> Scenario:
        """A YAML file (relative paths are from the repository root), any number of docs."""
        p = Path(path)
        if not p.is_absolute():
            p = REPO_ROOT / p
        return self.yaml(p.read_text(), source=str(p))

    def yaml(self, text: str, source: str = "<inline>") -> Scenario:
        docs = [d for d in yaml.safe_load_all(text) if d]
        return Scenario(self, docs, source)

    def objects(self, *objs: Obj) -> Scenario:
        return Scenario(self, list(objs), "<objects>")


class Scenario:
    def __init__(self, given: Given, docs: list[Obj], source: str) -> None:
        if not docs:
            raise ValueError(f"{source} holds no objects")
        self.given = given
        self.docs = docs
        self.source = source

    @property
    def when(self) -> When:
        return When(self)


class When:
    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario

    def _apply(self) -> tuple[list[Obj] | None, str]:
        g = self.scenario.given
        text = yaml.safe_dump_all(self.scenario.docs, sort_keys=False)
        try:
            out = g.kubectl.json("apply", "-n", g.namespace, "-f", "-", stdin=text)
        except KubectlError as exc:
            return None, exc.stderr
        items = out["items"] if out.get("kind") == "List" else [out]
        return items, ""

    def applied(self) -> Then:
        """``kubectl apply`` the documents; fails the test if the apiserver refuses any."""
        items, err = self._apply()
        if items is None:
            raise AssertionError(f"applying {self.scenario.source} was refused:\n{err}")
        return Then(self.scenario.given.kubectl, [Ref.of(i) for i in items])

    def applied_expecting_refusal(self) -> Refusal:
        """Apply, and fail the test if the apiserver accepts it."""
        items, err = self._apply()
        if items is not None:
            names = ", ".join(str(Ref.of(i)) for i in items)
            raise AssertionError(
                f"expected {self.scenario.source} to be refused; accepted: {names}"
            )
        return Refusal(err)


class Refusal:
    def __init__(self, message: str) -> None:
        self.message = message

    @property
    def then(self) -> Refusal:
        return self

    def refused_because(self, pattern: str) -> Refusal:
        """The refusal message matches the regular expression ``pattern``."""
        assert re.search(pattern, self.message), (
            f"refusal message does not match {pattern!r}:\n{self.message}"
        )
        return self


class Then:
    """Expectations on the applied objects; each waits up to ``timeout`` seconds."""

    def __init__(self, kubectl: Kubectl, refs: list[Ref]) -> None:
        self.kubectl = kubectl
        self.refs = refs

    @property
    def then(self) -> Then:
        return self

    @property
    def and_(self) -> Then:
        return self

    def of(self, kind: str, name: str | None = None) -> Then:
        """Narrow later expectations to the applied objects of ``kind`` (and ``name``)."""
        refs = [r for r in self.refs if r.kind == kind and (name is None or r.name == name)]
        if not refs:
            raise AssertionError(f"nothing of kind {kind} named {name} was applied: {self.refs}")
        return Then(self.kubectl, refs)

    def get(self) -> Obj:
        """The live object (exactly one must be in scope)."""
        if len(self.refs) != 1:
            raise AssertionError(f"get() needs one object in scope, have {self.refs}")
        return self._fetch(self.refs[0]) or {}

    def condition(self, type_: str, status: str = "True", timeout: float = DEFAULT_TIMEOUT) -> Then:
        """``status.conditions[type=type_].status == status`` on every object in scope."""

        def check(obj: Obj) -> bool:
            conds = dig(obj, "status.conditions")
            return isinstance(conds, list) and any(
                c.get("type") == type_ and c.get("status") == status for c in conds
            )

        return self.eventually(check, f"condition {type_}={status}", timeout)

    def field(
        self,
        path: str,
        equals: Any = MISSING,
        *,
        matches: Callable[[Any], bool] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> Then:
        """The field at ``path`` equals ``equals`` (or satisfies ``matches``, or exists)."""

        def check(obj: Obj) -> bool:
            value = dig(obj, path)
            if value is MISSING:
                return False
            if matches is not None:
                return matches(value)
            return equals is MISSING or value == equals

        want = f"== {equals!r}" if equals is not MISSING else "matches" if matches else "exists"
        return self.eventually(check, f"field {path} {want}", timeout)

    def eventually(
        self, check: Callable[[Obj], bool], description: str, timeout: float = DEFAULT_TIMEOUT
    ) -> Then:
        """Poll every object in scope until ``check`` holds for it (one deadline for all)."""
        deadline = time.monotonic() + timeout
        for ref in self.refs:
            try:
                wait_until(
                    lambda ref=ref: self._fetch(ref),  # type: ignore[misc]
                    lambda obj: obj is not None and check(obj),
                    timeout=max(0.0, deadline - time.monotonic()),
                    every=_POLL,
                    what=f"{ref}: {description}",
                )
            except WaitTimedOut as timed_out:
                last = timed_out.last if isinstance(timed_out.last, dict) else None
                raise AssertionError(self._explain(ref, last, description, timeout)) from None
        return self

    def _fetch(self, ref: Ref) -> Obj | None:
        try:
            out = self.kubectl.json("get", "-f", "-", stdin=ref.stub())
        except KubectlError as exc:
            if "NotFound" in exc.stderr or "not found" in exc.stderr:
                return None
            raise
        if out.get("kind") == "List":  # `get -f` wraps even a single object
            items: list[Obj] = out.get("items", [])
            return items[0] if items else None
        return out

    def _explain(self, ref: Ref, obj: Obj | None, description: str, timeout: float) -> str:
        body = yaml.safe_dump(_without_noise(obj), sort_keys=False) if obj else "(not found)\n"
        return (
            f"{ref}: {description} not reached within {timeout:g}s\n"
            f"--- {ref.kind}/{ref.name} ---\n{body}"
            f"--- Events for {ref.kind}/{ref.name} ---\n{events_text(self.kubectl, ref)}"
        )


def events_text(kubectl: Kubectl, ref: Ref) -> str:
    """The Events whose involvedObject is ``ref``, as kubectl prints them."""
    args = [
        "get",
        "events",
        "--field-selector",
        f"involvedObject.kind={ref.kind},involvedObject.name={ref.name}",
        "--sort-by=.lastTimestamp",
    ]
    args += ["-n", ref.namespace] if ref.namespace else ["-A"]
    result = kubectl.run(*args, check=False)
    text = (result.stdout or result.stderr).strip()
    return (text or "(no events)") + "\n"


def _without_noise(obj: Obj) -> Obj:
    meta = {k: v for k, v in obj.get("metadata", {}).items() if k != "managedFields"}
    annotations = {
        k: v
        for k, v in meta.get("annotations", {}).items()
        if k != "kubectl.kubernetes.io/last-applied-configuration"
    }
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    return {**obj, "metadata": meta}


def objects_in(paths: Iterable[Path]) -> list[Obj]:
    """Every YAML document in ``paths``."""
    return [d for p in paths for d in yaml.safe_load_all(p.read_text()) if d]
