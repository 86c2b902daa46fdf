"""Issues: the problems ``check_config`` reports at apply time.

Why: a block's JSON Schema cannot express every refusal (a program that does not compile, a
codec pair nobody provides). ``check_config`` reports those as ``Issue`` values built from
the block's own catalogued ``Message``, so an apply-time refusal has the same code / message
/ params shape as a run-time ``BlockFailure``. ``location`` is a path inside the step's
config (``("headers", "Authorization")``); the engine prefixes it with the step's location
in the document.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from dirigent.sdk.errors import json_safe
from dirigent.sdk.messages import Message

__all__ = ["Issue"]


class Issue(BaseModel):
    """One config problem: stable ``code``, rendered ``message``, ``params``, ``location``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: str
    message: str
    params: dict[str, JsonValue] = Field(default_factory=dict)
    location: tuple[str | int, ...] = ()

    @classmethod
    def of(
        cls, message: Message, /, *, location: tuple[str | int, ...] = (), **params: object
    ) -> Issue:
        """Build from a catalogued message: ``Issue.of(BAD_URL, location=("url",), url=u)``."""
        return cls(
            code=message.code,
            message=message.render(**params),
            params={name: json_safe(value) for name, value in params.items()},
            location=location,
        )
