"""Contribution checks what a plugin hands over; connection kinds mark secrets."""

from __future__ import annotations

from typing import Annotated, ClassVar

import pytest
from pydantic import BaseModel, Field, SecretStr

from dirigent.sdk import (
    API_VERSION,
    ENTRY_POINT_GROUP,
    ConnectionKind,
    Contribution,
    HealthReport,
    NotificationMessage,
    Notifier,
    Plugin,
    secret_fields,
)

from .test_blocks import CountsUp, Echo, Job


class ApiSettings(BaseModel):
    url: str
    token: SecretStr
    backup_token: SecretStr | None = None
    pinned: Annotated[SecretStr, Field(min_length=1)] = SecretStr("x")
    user: str = "me"


class AcmeApi(ConnectionKind[ApiSettings]):
    id: ClassVar[str] = "acme"
    config_model = ApiSettings

    async def check(self, config: ApiSettings) -> HealthReport:
        return HealthReport(ok=bool(config.token.get_secret_value()), message="reachable")


class LogSettings(BaseModel):
    level: str = "info"


class LogNotifier(Notifier[LogSettings]):
    id: ClassVar[str] = "log"
    config_model = LogSettings

    def __init__(self) -> None:
        self.sent: list[NotificationMessage] = []

    async def send(self, message: NotificationMessage, config: LogSettings) -> None:
        self.sent.append(message)


class AcmePlugin:
    def contribute(self) -> Contribution:
        return Contribution(
            api_version=1,
            operators=[Echo(), Job()],
            sensors=[CountsUp()],
            connection_kinds=[AcmeApi()],
            notifiers=[LogNotifier()],
            formats={"even": lambda v: isinstance(v, int) and v % 2 == 0},
        )


def test_entry_point_group() -> None:
    assert ENTRY_POINT_GROUP == "dirigent.plugins.v1"
    assert API_VERSION == 1


def test_a_plugin_contributes() -> None:
    plugin = AcmePlugin()
    assert isinstance(plugin, Plugin)
    contribution = plugin.contribute()
    assert [op.spec.id for op in contribution.operators] == ["demo.echo", "demo.job"]
    assert isinstance(contribution.operators, tuple)
    assert contribution.formats["even"](4)
    with pytest.raises(TypeError):
        contribution.formats["odd"] = bool  # type: ignore[index]


def test_empty_contribution() -> None:
    assert Contribution().operators == ()


async def test_connection_kind_and_notifier_run() -> None:
    report = await AcmeApi().check(ApiSettings(url="u", token=SecretStr("t")))
    assert report.ok
    notifier = LogNotifier()
    message = NotificationMessage(event="run.failed", title="t", body="b", severity="error")
    await notifier.send(message, LogSettings())
    assert notifier.sent == [message]


def test_secret_fields() -> None:
    assert secret_fields(ApiSettings) == ("token", "backup_token", "pinned")
    assert secret_fields(LogSettings) == ()


def test_contribution_refuses_wrong_api_version() -> None:
    with pytest.raises(ValueError, match="api_version 2"):
        Contribution(api_version=2)


def test_contribution_refuses_duplicate_ids() -> None:
    with pytest.raises(ValueError, match=r"'demo\.echo' is contributed twice"):
        Contribution(operators=[Echo(), Echo()])
    with pytest.raises(ValueError, match="contributed twice"):
        Contribution(notifiers=[LogNotifier(), LogNotifier()])


def test_contribution_refuses_misplaced_or_incomplete_blocks() -> None:
    with pytest.raises(TypeError, match="not an instance of Operator"):
        Contribution(operators=[CountsUp()])  # type: ignore[list-item]

    class NoSpec(Echo):
        spec = None  # type: ignore[assignment]

    with pytest.raises(TypeError, match=r"NoSpec\.spec must be an instance of OperatorSpec"):
        Contribution(operators=[NoSpec()])

    class NoModel(Echo):
        config_model = dict  # type: ignore[assignment]

    with pytest.raises(TypeError, match="config_model must be a pydantic model"):
        Contribution(operators=[NoModel()])

    class BadId(AcmeApi):
        id = "Acme API"

    with pytest.raises(TypeError, match="id must be dotted snake_case"):
        Contribution(connection_kinds=[BadId()])
