"""Statements written with named parameters (``:run_id``), sent to asyncpg as ``$1, $2, ...``.

A statement with a dozen arguments is read by name rather than by counting ``$n``: the
text names each value where it is used, and the call passes them as keywords. A name used
twice is one argument. Casts (``::text``) are left alone.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

_NAME = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")


@cache
def _compile(sql: str) -> tuple[str, tuple[str, ...]]:
    order: list[str] = []

    def number(m: re.Match[str]) -> str:
        if m.group(1) not in order:
            order.append(m.group(1))
        return f"${order.index(m.group(1)) + 1}"

    return _NAME.sub(number, sql), tuple(order)


def named(sql: str, **values: Any) -> tuple[str, list[Any]]:
    """``sql`` with ``:name`` placeholders numbered, and the values in that order.

    Raises ``KeyError`` when the text names a value the call does not give, and
    ``TypeError`` when the call gives one the text never uses (a typo on either side).
    """
    text, order = _compile(sql)
    unused = set(values) - set(order)
    if unused:
        raise TypeError(f"values not named in the statement: {sorted(unused)}")
    return text, [values[name] for name in order]
