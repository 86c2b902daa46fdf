"""A third party's notifier, for the alerting tests: POSTs the message as JSON to a URL.

It raises on any answer above 399, as a notifier must (the notification row owns the retry
budget). Contributed by the testing plugin, so the engine finds it in the catalog the same way
it finds the built-in ones.
"""

from __future__ import annotations

from typing import ClassVar

import httpx
from pydantic import BaseModel, ConfigDict

from dirigent.sdk import NotificationMessage, Notifier


class PostConfig(BaseModel):
    model_config = ConfigDict(extra="ignore")

    url: str


class PostNotifier(Notifier[PostConfig]):
    id: ClassVar[str] = "testing.post"
    summary: ClassVar[str] = "POST the alert as JSON (tests)."
    config_model: ClassVar[type[BaseModel]] = PostConfig

    async def send(self, message: NotificationMessage, config: PostConfig) -> None:
        async with httpx.AsyncClient(timeout=10) as client:
            answer = await client.post(config.url, json=message.model_dump(mode="json"))
        answer.raise_for_status()
