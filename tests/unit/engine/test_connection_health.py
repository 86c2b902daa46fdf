"""``check_opened``: a connection kind's check, bounded and never raising; each failure a reason.

A unit test of ``runtime.health`` itself: it imports the module below the door on purpose.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel

from dirigent.engine.infrastructure.crypto import SealError
from dirigent.engine.runtime.health import check_opened
from dirigent.sdk import ConnectionKind, HealthReport


class Settings(BaseModel):
    url: str


class Kind(ConnectionKind[Settings]):
    id: ClassVar[str] = "probe"
    config_model: ClassVar[type[BaseModel]] = Settings

    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour

    async def check(self, config: Settings) -> HealthReport:
        if self.behaviour == "raise":
            raise RuntimeError("the plugin broke")
        if self.behaviour == "hang":
            await asyncio.Event().wait()
        return HealthReport(ok=self.behaviour == "ok", message=f"{config.url} said so")


async def values() -> Mapping[str, Any]:
    return {"url": "http://x"}


async def unopenable() -> Mapping[str, Any]:
    raise SealError("sealed under another key")


async def test_each_outcome_is_a_reason() -> None:
    async def run(kind: Kind | None, opened: Any = values, within: float = 5) -> tuple[Any, ...]:
        h = await check_opened("probe", kind, opened, within=within)
        return h.ok, h.reason, h.message

    assert await run(Kind("ok")) == (True, "Reachable", "http://x said so")
    assert await run(Kind("no")) == (False, "Unreachable", "http://x said so")
    assert await run(None) == (None, "NoCheck", "connection kind 'probe' is not installed")
    assert (await run(Kind("raise")))[:2] == (False, "CheckFailed")
    assert "RuntimeError: the plugin broke" in (await run(Kind("raise")))[2]
    assert (await run(Kind("hang"), within=0.05))[:2] == (False, "CheckTimedOut")
    assert (await run(Kind("ok"), unopenable))[:2] == (False, "Unopenable")

    async def empty() -> Mapping[str, Any]:
        return {}

    ok, reason, message = await run(Kind("ok"), empty)
    assert (ok, reason) == (False, "InvalidSettings") and message.startswith("url:")
