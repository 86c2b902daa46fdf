"""SQL lives only in ``dirigent.engine.store``: no other module of ours writes or runs it.

Import-linter keeps the drivers (asyncpg, sqlalchemy, alembic) out of the listed layers;
this test reads the source of every module outside the store, so a module added later is
covered without editing a list. It looks for three things: a driver import, a database call
(``fetch``/``fetchrow``/``fetchval``/``execute``/``executemany``) given SQL text, and a string
that is an SQL statement. ``dirigent.blocks`` is not ours to check here: a block may talk to
a user's own database (the ``postgres`` connection check does).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = [
    ROOT / "engine/src/dirigent/engine",
    ROOT / "api/src/dirigent/api",
    ROOT / "operator/src/dirigent/operator",
    ROOT / "cli/src/dirigent/cli",
]
STORE = ROOT / "engine/src/dirigent/engine/store"
DRIVERS = ("asyncpg", "sqlalchemy", "alembic")
DB_CALLS = {"fetch", "fetchrow", "fetchval", "execute", "executemany"}
SQL = re.compile(
    r"^\s*(SELECT\s|INSERT\s+INTO\s|UPDATE\s+\w+\s+SET\s|DELETE\s+FROM\s|WITH\s+\w+\s+AS\s*\("
    r"|LISTEN\s|UNLISTEN\s|NOTIFY\s|CREATE\s+(TABLE|INDEX)\s)"
)


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in pkg.rglob("*.py") if STORE not in p.parents)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (prose may quote SQL words)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _text(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)
        )
    return None


def sql_outside_store(path: Path) -> list[str]:
    """What in ``path`` talks SQL: one line per finding, with its line number."""
    tree = ast.parse(path.read_text(), str(path))
    docs = _docstrings(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
            )
            for name in names:
                if name.split(".")[0] in DRIVERS:
                    found.append(f"{node.lineno}: imports {name}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in DB_CALLS and node.args and _text(node.args[0]) is not None:
                found.append(f"{node.lineno}: .{node.func.attr}() given SQL text")
        elif (
            isinstance(node, ast.Constant)
            and id(node) not in docs
            and isinstance(node.value, str)
            and SQL.match(node.value)
        ):
            found.append(f"{node.lineno}: SQL statement {node.value.split()[0]} ...")
    return sorted(found, key=lambda f: int(f.split(":")[0]))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_sql_outside_the_store(path: Path) -> None:
    assert sql_outside_store(path) == [], "move this SQL into a dirigent.engine.store module"


def test_the_check_sees_sql(tmp_path: Path) -> None:
    """The check itself finds each kind of SQL it looks for (so the test above can fail)."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""SELECT in a docstring is prose."""\n'
        "import asyncpg\n"
        "from sqlalchemy import text\n"
        "async def f(conn, block):\n"
        '    await conn.fetchval(f"SELECT {1}")\n'
        "    await block.execute(config, ctx)\n"
        '    q = """UPDATE runs SET status = 1"""\n'
    )
    assert sql_outside_store(sample) == [
        "2: imports asyncpg",
        "3: imports sqlalchemy",
        "5: .fetchval() given SQL text",
        "5: SQL statement SELECT ...",
        "7: SQL statement UPDATE ...",
    ]


def test_every_package_is_read() -> None:
    modules = _modules()
    assert any(p.name == "executing.py" for p in modules)
    assert any(p.name == "migrate.py" for p in modules)
    assert not any(STORE in p.parents for p in modules)
