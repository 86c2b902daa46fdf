"""Values PostgreSQL cannot store, found before a write rather than by a failed transaction.

PostgreSQL refuses a NUL character (U+0000) in ``text`` and in ``jsonb`` strings, and a lone
UTF-16 surrogate cannot even be encoded to send. One such value inside a batched write
aborts the whole batch, so the engine looks for them first: a document or params holding one
is refused at the door with its location, a step output holding one fails that attempt alone
(``engine.value.unstorable``), and free text (log lines, error and wait messages) is made
storable by escaping the character visibly.
"""

from __future__ import annotations

import re
from typing import Any

_BAD = re.compile("[\x00\ud800-\udfff]")


def _bad_string(text: str) -> bool:
    return _BAD.search(text) is not None


def unstorable_path(value: Any, *path: str | int) -> tuple[str | int, ...] | None:
    """The path to the first string (or mapping key) PostgreSQL cannot store, else None."""
    if isinstance(value, str):
        return path if _bad_string(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and _bad_string(key):
                return (*path, key)
            found = unstorable_path(item, *path, key)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = unstorable_path(item, *path, index)
            if found is not None:
                return found
    return None


def storable_text(text: str) -> str:
    """Free text made storable: NUL and lone surrogates written out as escapes."""
    if not _bad_string(text):
        return text
    return _BAD.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def storable_value(value: Any) -> Any:
    """A JSON value with every string and key made storable (for log fields and the like)."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable_value(k): storable_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable_value(v) for v in value]
    return value
