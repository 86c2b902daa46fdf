"""A connection's health: its kind's ``check()`` run with the opened connection.

Where it runs: in the process that calls ``Engine.check_connection`` — the operator, for the
``Healthy`` condition of a Connection resource. The secret fields are opened there, with the
same ``DIRIGENT_SECRET_KEY`` the operator already holds to seal them at apply (the operator is
the one process that reads the Kubernetes Secrets in the first place), so checking in the
operator widens nobody's access; workers keep opening connections only for the step that
names one. A check is bounded by ``within`` seconds and never raises: every way it can go
wrong is a ``ConnectionHealth`` with a reason a person can act on.

Reasons: ``Reachable`` (the check said ok), ``Unreachable`` (the check said not ok, with its
message), ``CheckTimedOut``, ``CheckFailed`` (the check raised), ``InvalidSettings`` (the
stored settings do not fit the kind's model), ``Unopenable`` (a sealed field cannot be
opened, e.g. another key), ``NoCheck`` (the kind is not installed in this process: health is
Unknown, not False).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from dirigent.sdk import ConnectionKind
from dirigent.sdk.secrets import redact

__all__ = ["ConnectionHealth", "check_opened"]


@dataclass(frozen=True)
class ConnectionHealth:
    """``ok`` is None when nothing could be checked (no check installed for the kind)."""

    ok: bool | None
    reason: str
    message: str
    latency_ms: int | None = None


async def check_opened(
    kind_id: str,
    kind: ConnectionKind[Any] | None,
    opened: Callable[[], Awaitable[Mapping[str, Any]]],
    *,
    within: float,
    secrets: Collection[str] = (),
) -> ConnectionHealth:
    """Open the connection (``opened``), build the kind's config, and run its check.

    ``secrets`` (filled by ``opened``) are redacted from every message: a check's own words
    can quote a URL with credentials or an echoed token.
    """
    if kind is None:
        return ConnectionHealth(None, "NoCheck", f"connection kind '{kind_id}' is not installed")
    try:
        values = await opened()
    except ValueError as err:  # SealError is a ValueError; so is a missing secret key
        return ConnectionHealth(False, "Unopenable", f"the connection cannot be opened: {err}")
    try:
        config = type(kind).config_model.model_validate(dict(values))
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "settings"
        return ConnectionHealth(False, "InvalidSettings", f"{where}: {first['msg']}")
    try:
        report = await asyncio.wait_for(kind.check(config), within)
    except TimeoutError:
        return ConnectionHealth(False, "CheckTimedOut", f"the check took longer than {within:g} s")
    except Exception as err:  # a plugin's check is outside code: whatever it raises is data
        said = redact(f"the check raised {type(err).__name__}: {err}", secrets)
        return ConnectionHealth(False, "CheckFailed", said)
    message = redact(report.message or ("reachable" if report.ok else "not reachable"), secrets)
    reason = "Reachable" if report.ok else "Unreachable"
    return ConnectionHealth(report.ok, reason, message, report.latency_ms)
