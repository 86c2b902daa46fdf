"""The Argo CD health check (hack/argocd/health.lua) maps dirigent statuses to Argo CD health.

Run for real under Lua 5.1 (Debian's lua5.1: the language Argo CD's gopher-lua implements),
with the object handed over as Argo CD does: a global ``obj``, the script's ``return hs``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "hack" / "argocd" / "health.lua"


def lua_literal(value: Any) -> str:
    """A Lua 5.1 table constructor for JSON-like data."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'
    if isinstance(value, list):
        return "{" + ", ".join(lua_literal(v) for v in value) + "}"
    if isinstance(value, dict):
        return (
            "{"
            + ", ".join(f"[{lua_literal(k)}] = {lua_literal(v)}" for k, v in value.items())
            + "}"
        )
    raise TypeError(type(value))


def health(obj: dict[str, Any], tmp_path: Path) -> tuple[str, str]:
    lua = shutil.which("lua5.1")
    assert lua, "lua5.1 is missing: apt-get install lua5.1 (.ci/run installs it)"
    runner = tmp_path / "runner.lua"
    runner.write_text(
        f"obj = {lua_literal(obj)}\n"
        f"local hs = dofile({lua_literal(str(SCRIPT))})\n"
        'io.write(hs.status, "\\t", hs.message or "")\n'
    )
    out = subprocess.run([lua, str(runner)], capture_output=True, text=True, check=True, timeout=10)
    status, _, message = out.stdout.partition("\t")
    return status, message


def _obj(
    kind: str, status: dict[str, Any] | None, generation: int = 3, **spec: Any
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "dirigent.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": "x", "namespace": "etl", "generation": generation},
        "spec": spec,
    }
    if status is not None:
        obj["status"] = status
    return obj


def _ready(state: str, reason: str = "", message: str = "", generation: int = 3) -> dict[str, Any]:
    return {
        "observedGeneration": generation,
        "conditions": [
            {"type": "Other", "status": "False"},
            {"type": "Ready", "status": state, "reason": reason, "message": message},
        ],
    }


CASES = [
    ("no status yet", _obj("Pipeline", None), "Progressing", "Waiting for the dirigent operator"),
    (
        "an older generation observed",
        _obj("Pipeline", _ready("True", generation=2)),
        "Progressing",
        "generation 3",
    ),
    (
        "ready",
        _obj("Pipeline", _ready("True", "Applied", "version 4 active")),
        "Healthy",
        "version 4",
    ),
    (
        "invalid edit",
        _obj("Pipeline", _ready("False", "Invalid", "steps.load.block: unknown block")),
        "Degraded",
        "Invalid: steps.load.block: unknown block",
    ),
    (
        "missing pipeline",
        _obj("Schedule", _ready("False", "PipelineNotFound"), pipeline="gone"),
        "Degraded",
        "PipelineNotFound",
    ),
    (
        "ready unknown",
        _obj("Connection", _ready("Unknown", message="checking")),
        "Progressing",
        "checking",
    ),
    (
        "no Ready condition",
        _obj(
            "Webhook",
            {"observedGeneration": 3, "conditions": [{"type": "Other", "status": "True"}]},
        ),
        "Progressing",
        "Ready condition",
    ),
    ("paused schedule", _obj("Schedule", _ready("True"), paused=True), "Suspended", "paused"),
    ("disabled webhook", _obj("Webhook", _ready("True"), enabled=False), "Suspended", "disabled"),
    ("enabled webhook", _obj("Webhook", _ready("True"), enabled=True), "Healthy", ""),
    (
        "failing connection",
        _obj("Connection", _ready("False", "CheckFailed", "connection refused")),
        "Degraded",
        "CheckFailed: connection refused",
    ),
    (
        "a failed last run keeps a ready pipeline healthy",
        _obj("Pipeline", {**_ready("True"), "lastRun": {"state": "failed"}}),
        "Healthy",
        "",
    ),
]


@pytest.mark.parametrize(
    ("obj", "want", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_health(obj: dict[str, Any], want: str, message: str, tmp_path: Path) -> None:
    status, got = health(obj, tmp_path)
    assert status == want, got
    assert message in got


def test_the_script_in_docs_is_the_tested_one() -> None:
    doc = (ROOT / "docs" / "gitops.md").read_text()
    for line in SCRIPT.read_text().splitlines():
        assert line in doc, f"docs/gitops.md lacks: {line!r} (run `uv run python -m hack.ship`)"
