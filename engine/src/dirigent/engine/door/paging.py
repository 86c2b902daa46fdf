"""Keyset pages as every listing of the door answers them: a bounded limit, an opaque cursor."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar

from dirigent.engine.shapes.problems import ProblemsError, problem
from dirigent.engine.shapes.views import Page, encode_cursor

T = TypeVar("T")
MAX_PAGE: Final = 1000


def checked_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_PAGE:
        raise ProblemsError(
            [problem("page.limit.invalid", f"limit must be between 1 and {MAX_PAGE}", "limit")]
        )
    return limit


def page_of(rows: list[T], limit: int, key: Callable[[T], tuple[Any, ...]]) -> Page[T]:
    """A page whose ``next`` names the last row's key when the page came back full."""
    more = len(rows) == limit and rows
    return Page(items=rows, next=encode_cursor(*key(rows[-1])) if more else None)
