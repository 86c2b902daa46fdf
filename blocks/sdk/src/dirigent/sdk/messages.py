"""Messages: catalogued sentences with a stable code.

Why: a failure or a config issue is met in many places -- the attempt row, the API's
problem document, a terminal, a Kubernetes Event. A stable dotted ``code`` plus the
``params`` that filled the sentence lets every one of them recognise the same failure, while
the English stays free to be reworded. A code is public API exactly as a block id is:
adding one is compatible, renaming one is not.

A block family declares its catalogue as module constants::

    HTTP_STATUS = Message("http.status", "{method} {url} answered {status}")

Rendering never raises: a placeholder with no matching param is left as ``{name}`` in the
sentence, because a message that cannot render must not hide the failure it describes.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dirigent.sdk.names import is_block_id

__all__ = ["Message"]


class _LenientFormatter(string.Formatter):
    def get_value(self, key: int | str, args: Any, kwargs: Mapping[str, Any]) -> Any:
        if isinstance(key, str) and key not in kwargs:
            return _Missing(key)
        return super().get_value(key, args, kwargs)

    def format_field(self, value: Any, format_spec: str) -> Any:
        if isinstance(value, _Missing):
            return str(value)
        try:
            return super().format_field(value, format_spec)
        except (TypeError, ValueError):
            return str(value)


class _Missing:
    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key

    def __str__(self) -> str:
        return "{" + self.key + "}"

    def __getattr__(self, name: str) -> _Missing:
        return _Missing(f"{self.key}.{name}")

    def __getitem__(self, item: object) -> _Missing:
        return _Missing(f"{self.key}[{item}]")


_FORMATTER = _LenientFormatter()


@dataclass(frozen=True, slots=True)
class Message:
    """One catalogued sentence: a stable dotted ``code`` and a ``str.format`` template.

    ``code`` follows the block-id grammar (dotted snake_case, at least two segments) and is
    prefixed by the family that owns it (``http.status`` belongs to ``http``).
    """

    code: str
    template: str

    def __post_init__(self) -> None:
        if not is_block_id(self.code):
            raise ValueError(
                f"message code {self.code!r} must be dotted snake_case with at least two "
                "parts, such as 'http.status'"
            )

    def render(self, **params: object) -> str:
        """The sentence with ``params`` filled in; unknown placeholders stay as ``{name}``."""
        try:
            return _FORMATTER.format(self.template, **params)
        except (IndexError, KeyError, ValueError, AttributeError):
            # A malformed template ("{", "{0}") still yields something readable.
            return self.template
