"""One word per idea: retired words never come back as a name.

"Settle" meant both writing an attempt's outcome and a step or run reaching its final status;
the code now says *record* for the first and *finish* for the second (the glossary at the
top of docs/engine.md). This test reads every Python file the project owns — the products,
tests, benches, e2e and hack — and fails on any identifier (a module, class, function,
argument, variable, attribute or imported name) that holds a retired word, and on any string
constant of the engine's schema (index and constraint names). Old migrations are history and
are not read.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RETIRED = {
    "settl": "say record (writing an attempt's outcome) or finish (reaching a terminal status)",
}
OWNED = ["blocks", "engine", "api", "operator", "cli", "tests", "bench", "e2e", "hack"]
SCHEMA = ROOT / "engine/src/dirigent/engine/store/schema/tables.py"


def _files() -> list[Path]:
    found: list[Path] = []
    for top in OWNED:
        for path in (ROOT / top).rglob("*.py"):
            parts = set(path.parts)
            if "versions" in parts and "migrations" in parts:
                continue
            if ".venv" in parts or "node_modules" in parts:
                continue
            found.append(path)
    return found


def _names(tree: ast.AST) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.append((node.lineno, node.name))
        elif isinstance(node, ast.arg):
            out.append((node.lineno, node.arg))
        elif isinstance(node, ast.Name):
            out.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute):
            out.append((node.lineno, node.attr))
        elif isinstance(node, ast.alias):
            out.append((node.lineno, node.asname or node.name))
        elif isinstance(node, ast.keyword) and node.arg:
            out.append((node.lineno, node.arg))
    return out


def _offences(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    named = _names(tree)
    if path == SCHEMA:
        named += [
            (n.lineno, n.value)
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
        ]
    named.append((0, path.stem))
    out = []
    for line, name in named:
        for word, instead in RETIRED.items():
            if re.search(word, name, re.IGNORECASE):
                out.append(f"{path.relative_to(root)}:{line}: {name!r}: {instead}")
    return out


def test_no_retired_word_is_a_name() -> None:
    offences = [o for path in _files() for o in _offences(path)]
    assert not offences, "\n".join(offences)


def test_the_test_finds_a_retired_word(tmp_path: Path) -> None:
    """The check itself can fail: a planted name is reported with its line."""
    planted = tmp_path / "planted.py"
    word = "settl" + "e_runs"
    planted.write_text(f"def {word}(x):\n    return x\n")
    found = _offences(planted, root=tmp_path)
    assert found and found[0].startswith("planted.py:1:"), found
