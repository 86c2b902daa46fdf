"""No function in our packages runs past 80 lines (docs/house-style.md: functions under 80).

A long function is split into named steps. The few still over the line are listed below
with the issue that owns them, so the list only shrinks: remove an entry when its function
is split (the test also fails when a listed function no longer needs its entry).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = [
    "blocks/sdk/src",
    "blocks/builtin/src",
    "engine/src",
    "api/src",
    "operator/src",
    "cli/src",
    "storage/s3/src",
]
LIMIT = 80
KNOWN = {
    # (path, function): the issue that will split it
    # A migration is one schema step, read top to bottom beside its downgrade.
    (
        "engine/src/dirigent/engine/store/schema/migrations/versions/0001_baseline.py",
        "upgrade",
    ): "migration",
    (
        "engine/src/dirigent/engine/store/schema/migrations/versions/0006_triggers.py",
        "upgrade",
    ): "migration",
}


def long_functions(root: Path = ROOT) -> dict[tuple[str, str], int]:
    """Every function over ``LIMIT`` lines: (path, name) -> its length."""
    out: dict[tuple[str, str], int] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    length = (node.end_lineno or node.lineno) - node.lineno + 1
                    if length > LIMIT:
                        out[(str(path.relative_to(root)), node.name)] = length
    return out


def test_no_function_runs_past_the_limit() -> None:
    found = long_functions()
    new = {k: v for k, v in found.items() if k not in KNOWN}
    assert new == {}, "split these into named steps (or, for now, list them with an issue)"


def test_the_known_list_only_shrinks() -> None:
    split = set(KNOWN) - set(long_functions())
    assert split == set(), "these were split: remove them from KNOWN"


def test_the_check_measures(tmp_path: Path) -> None:
    pkg = tmp_path / "engine/src"
    pkg.mkdir(parents=True)
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (pkg / "m.py").write_text(f"def long():\n{body}\n\n\ndef short():\n    return 1\n")
    assert long_functions(tmp_path) == {("engine/src/m.py", "long"): LIMIT + 1}
