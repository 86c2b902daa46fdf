"""What every built-in block shares: config models that refuse unknown fields, camelCase.

Why: a typo in a document must be refused at apply, not ignored, so every config and output
model forbids extra fields (``additionalProperties: false`` in the published schema).
Config fields are written camelCase in documents (``verifyTls``, like every manifest field)
and snake_case in Python; outputs keep snake_case, the form ``${steps.x.output.y}`` reads.
A connection kind's model also hides its input from its errors: pydantic quotes the value it
refused (an opened secret, or the whole dict for a model-level check), and that text ends up
in attempt errors, logs and Events. A kind's check goes through ``CheckedKind`` for the same
reason: its message is written into a Connection's status and Events.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable
from typing import TypeVar

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from dirigent.sdk import ConnectionKind, HealthReport, redact, secret_values

__all__ = ["CheckedKind", "Config", "ConnectionConfig", "Output", "has_reference", "tail"]


class Config(BaseModel):
    """A block's or a connection kind's config: camelCase in documents, no unknown fields."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)


class ConnectionConfig(Config):
    """A connection kind's settings: like ``Config``, and its errors never quote its input."""

    model_config = ConfigDict(hide_input_in_errors=True)


C = TypeVar("C", bound=ConnectionConfig)


class CheckedKind(ConnectionKind[C]):
    """A kind whose check never raises and never says a secret: subclasses write ``reach``.

    Anything ``reach`` raises becomes a report, and the values ``secrets`` names (the
    config's secret fields, by default) are redacted from every message.
    """

    async def check(self, config: C) -> HealthReport:
        secrets = self.secrets(config)
        try:
            report = await self.reach(config)
        except Exception as err:  # a failed check is a report, never a traceback
            message = f"the check failed: {type(err).__name__}: {err}"
            return HealthReport(ok=False, message=redact(message, secrets))
        if report.message is None:
            return report
        return report.model_copy(update={"message": redact(report.message, secrets)})

    @abstractmethod
    async def reach(self, config: C) -> HealthReport:
        """Reach the system and report; may raise (``check`` turns it into a report)."""

    def secrets(self, config: C) -> Iterable[str]:
        """The values no message may carry: the config's secret fields, by default."""
        return secret_values(config)


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
