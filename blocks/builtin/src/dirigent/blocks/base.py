"""What every built-in block shares: config models that refuse unknown fields, camelCase.

Why: a typo in a document must be refused at apply, not ignored, so every config and output
model forbids extra fields (``additionalProperties: false`` in the published schema).
Config fields are written camelCase in documents (``verifyTls``, like every manifest field)
and snake_case in Python; outputs keep snake_case, the form ``${steps.x.output.y}`` reads.
A connection kind's model also hides its input from its errors: pydantic quotes the value it
refused (an opened secret, or the whole dict for a model-level check), and that text ends up
in attempt errors, logs and Events.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

__all__ = ["Config", "ConnectionConfig", "Output", "has_reference", "tail"]


class Config(BaseModel):
    """A block's or a connection kind's config: camelCase in documents, no unknown fields."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)


class ConnectionConfig(Config):
    """A connection kind's settings: like ``Config``, and its errors never quote its input."""

    model_config = ConfigDict(hide_input_in_errors=True)


class Output(BaseModel):
    """A block's output: no unknown fields, snake_case as references read it.

    A field whose name Python reserves (``json``) carries it as an alias, and the alias is
    what the output holds.
    """

    model_config = ConfigDict(extra="forbid", serialize_by_alias=True, validate_by_name=True)


def has_reference(value: object) -> bool:
    """True when ``value`` is a string still holding a ``${...}`` (not known until the run)."""
    return isinstance(value, str) and "${" in value


def tail(data: bytes, limit: int) -> str:
    """The last ``limit`` bytes of ``data`` as text (a split character is replaced)."""
    return data[-limit:].decode("utf-8", errors="replace") if limit else ""
