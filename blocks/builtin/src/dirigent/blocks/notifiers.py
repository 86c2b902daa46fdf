"""Notifiers: log, webhook, slack (incoming webhook), email (SMTP).

Delivery is the engine's queued, retried work, so a notifier raises on any refusal rather
than swallowing it: the notification row owns the retry budget, and a channel that quietly
returned on a 500 would turn a recoverable blip into an alert nobody gets. The webhook,
slack and email notifiers take the config of the connection kind of the same id, so a
channel's credential is sealed and health-checked through the one connection path.
"""

from __future__ import annotations

import asyncio
from email.message import EmailMessage
from typing import ClassVar, Literal

import httpx
import structlog
from pydantic import BaseModel

from dirigent.blocks.base import Config
from dirigent.blocks.connections import (
    SlackConnection,
    SmtpConnection,
    WebhookConnection,
    smtp_session,
)
from dirigent.blocks.webhook import post_json
from dirigent.sdk import (
    BlockFailure,
    ErrorClass,
    Message,
    NotificationMessage,
    Notifier,
    http_status_class,
    redact,
    secret_values,
)

__all__ = ["EmailNotifier", "LogNotifier", "SlackNotifier", "WebhookNotifier"]

SLACK_STATUS = Message("notify.slack.status", "Slack answered {status}: {body}")
SLACK_TRANSPORT = Message("notify.slack.transport", "Slack could not be reached: {error}")
EMAIL_REFUSED = Message("notify.email.refused", "the SMTP server refused {recipients}: {error}")
EMAIL_NO_RECIPIENT = Message(
    "notify.email.no_recipient", "no recipient: set 'to' on the connection"
)

_log = structlog.get_logger("dirigent.notify")


class LogConfig(Config):
    level: Literal["info", "warning", "error"] = "warning"


class LogNotifier(Notifier[LogConfig]):
    """Writes the alert to the process log: needs no credential, always works."""

    id: ClassVar[str] = "log"
    summary: ClassVar[str] = "Write the alert to the worker's log."
    config_model: ClassVar[type[BaseModel]] = LogConfig

    async def send(self, message: NotificationMessage, config: LogConfig) -> None:
        getattr(_log, config.level)(
            message.title,
            event_kind=message.event,
            body=message.body,
            namespace=message.namespace,
            pipeline=message.pipeline,
            run_id=message.run_id,
        )


class WebhookNotifier(Notifier[WebhookConnection]):
    """POSTs the alert as JSON (HMAC-signed when the connection holds a secret)."""

    id: ClassVar[str] = "webhook"
    summary: ClassVar[str] = "POST the alert as JSON to a webhook connection."
    config_model: ClassVar[type[BaseModel]] = WebhookConnection

    async def send(self, message: NotificationMessage, config: WebhookConnection) -> None:
        await post_json(config, message.model_dump(mode="json"), {})


class SlackNotifier(Notifier[SlackConnection]):
    """Posts the alert to a Slack incoming webhook."""

    id: ClassVar[str] = "slack"
    summary: ClassVar[str] = "Post the alert to a Slack incoming webhook."
    config_model: ClassVar[type[BaseModel]] = SlackConnection

    async def send(self, message: NotificationMessage, config: SlackConnection) -> None:
        links = "".join(f"\n<{url}|{name}>" for name, url in message.links.items())
        payload = {"text": f"*{message.title}*\n{message.body}{links}"}
        try:
            async with httpx.AsyncClient(timeout=config.timeout.total_seconds()) as client:
                response = await client.post(config.webhook_url.get_secret_value(), json=payload)
        except httpx.HTTPError as err:
            # The webhook URL is the credential; an error about the URL would quote it.
            error = redact(repr(err), secret_values(config))
            raise BlockFailure(
                SLACK_TRANSPORT, error_class=ErrorClass.TRANSIENT, error=error
            ) from err
        if response.status_code >= 400:
            raise BlockFailure(
                SLACK_STATUS,
                error_class=http_status_class(response.status_code),
                status=response.status_code,
                body=redact(response.text, secret_values(config))[:300],
            )


class EmailNotifier(Notifier[SmtpConnection]):
    """Sends one plain-text email per alert over SMTP."""

    id: ClassVar[str] = "email"
    summary: ClassVar[str] = "Send the alert as a plain-text email over SMTP."
    config_model: ClassVar[type[BaseModel]] = SmtpConnection

    async def send(self, message: NotificationMessage, config: SmtpConnection) -> None:
        if not config.to:
            raise BlockFailure(EMAIL_NO_RECIPIENT, error_class=ErrorClass.REJECTED)
        mail = EmailMessage()
        mail["Subject"] = message.title
        mail["From"] = config.from_address
        mail["To"] = ", ".join(config.to)
        links = "".join(f"\n{name}: {url}" for name, url in message.links.items())
        mail.set_content(message.body + links)

        def deliver() -> dict[str, tuple[int, bytes]]:
            session = smtp_session(config)
            try:
                return session.send_message(mail)
            finally:
                session.quit()

        refused = await asyncio.to_thread(deliver)
        if refused:
            raise BlockFailure(
                EMAIL_REFUSED,
                error_class=ErrorClass.UNKNOWN,
                recipients=sorted(refused),
                error=str(refused),
            )
