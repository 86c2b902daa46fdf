"""Plugins: how a package hands its blocks, connection kinds, notifiers, formats and
storage backends over.

Why one mechanism: a plugin package exposes one object through the ``dirigent.plugins.v1``
entry-point group; the host calls its ``contribute()`` once at startup and never again, then
calls blocks directly. A storage backend (``dirigent.sdk.storage``) serves one URI scheme;
``file://`` is the host's own and no plugin may contribute it.

::

    class AcmePlugin:
        def contribute(self) -> Contribution:
            return Contribution(operators=[AcmeOrders()], connection_kinds=[AcmeApi()])

    plugin = AcmePlugin()

    # pyproject.toml
    # [project.entry-points."dirigent.plugins.v1"]
    # acme = "dirigent_acme:plugin"

A breaking change to this contract is a new entry-point group (``dirigent.plugins.v2``),
never a silent change to v1. ``Contribution`` checks what it is given, so a plugin bug is
reported at startup, naming the plugin's object, rather than at the first run.
"""

from __future__ import annotations

import datetime as dt
import re
import types
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Generic, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, JsonValue, SecretStr

from dirigent.sdk.blocks import Operator, Sensor
from dirigent.sdk.specs import BlockSpec, OperatorSpec, SensorSpec
from dirigent.sdk.storage import SCHEME_PATTERN, StorageBackend

__all__ = [
    "API_VERSION",
    "ENTRY_POINT_GROUP",
    "PLUGIN_ID_PATTERN",
    "ConnectionKind",
    "Contribution",
    "FormatChecker",
    "HealthReport",
    "NotificationMessage",
    "Notifier",
    "Plugin",
    "secret_fields",
]

ENTRY_POINT_GROUP: Final = "dirigent.plugins.v1"
API_VERSION: Final = 1

PLUGIN_ID_PATTERN: Final = r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$"
"""Connection kind and notifier ids: dotted snake_case, one segment allowed (``http``)."""
_PLUGIN_ID_RE: Final = re.compile(PLUGIN_ID_PATTERN)
_SCHEME_RE: Final = re.compile(SCHEME_PATTERN)
HOST_SCHEMES: Final = frozenset({"file"})
"""Schemes the host serves itself; a plugin contributing one is refused."""

ConfigT = TypeVar("ConfigT", bound=BaseModel)

FormatChecker = Callable[[object], bool]
"""A JSON Schema ``format`` check: True when the value conforms."""


class HealthReport(BaseModel):
    """The answer to a connection check: reachable and usable, or why not."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: bool
    message: str | None = None
    latency_ms: int | None = Field(default=None, ge=0)
    details: dict[str, JsonValue] = Field(default_factory=dict)


class ConnectionKind(ABC, Generic[ConfigT]):
    """A kind of connection (``http``, ``acme``): its ``id``, settings model and health check.

    Fields of ``config_model`` typed ``SecretStr`` are secrets: in a cluster they come from
    ``secretKeyRef``s, are stored encrypted, and are opened only by ``ctx.connection``.
    """

    id: ClassVar[str]
    summary: ClassVar[str] = ""
    config_model: ClassVar[type[BaseModel]]

    @abstractmethod
    async def check(self, config: ConfigT) -> HealthReport:
        """Reach the system with ``config`` and report; must not change anything."""


class NotificationMessage(BaseModel):
    """What an alert rule hands a notifier: rendered text plus the facts behind it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    event: str
    title: str
    body: str
    severity: Literal["info", "warning", "error"] = "info"
    namespace: str | None = None
    pipeline: str | None = None
    run_id: int | None = None
    occurred_at: dt.datetime | None = None
    links: dict[str, str] = Field(default_factory=dict)
    data: dict[str, JsonValue] = Field(default_factory=dict)


class Notifier(ABC, Generic[ConfigT]):
    """An alert channel (``log``, ``webhook``, ``slack``).

    ``send`` is queued, retried work owned by the engine: it should raise on failure (the
    exception is sorted by ``classify_default``) and tolerate being called twice.
    """

    id: ClassVar[str]
    summary: ClassVar[str] = ""
    config_model: ClassVar[type[BaseModel]]

    @abstractmethod
    async def send(self, message: NotificationMessage, config: ConfigT) -> None:
        """Deliver ``message`` through this channel using ``config``."""


@runtime_checkable
class Plugin(Protocol):
    """What the ``dirigent.plugins.v1`` entry point names: an object with ``contribute()``."""

    def contribute(self) -> Contribution: ...


def _is_secret(annotation: Any) -> bool:
    if annotation is SecretStr:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return any(_is_secret(arg) for arg in typing.get_args(annotation))
    if origin is typing.Annotated:
        return _is_secret(typing.get_args(annotation)[0])
    return False


def secret_fields(model: type[BaseModel]) -> tuple[str, ...]:
    """Names of ``model``'s top-level fields typed ``SecretStr`` (optional ones included)."""
    return tuple(name for name, info in model.model_fields.items() if _is_secret(info.annotation))


@dataclass(frozen=True)
class Contribution:
    """Everything one plugin contributes. Lists are stored as tuples; ids must be unique."""

    api_version: int = API_VERSION
    operators: Sequence[Operator[Any, Any]] = ()
    sensors: Sequence[Sensor[Any, Any]] = ()
    connection_kinds: Sequence[ConnectionKind[Any]] = ()
    notifiers: Sequence[Notifier[Any]] = ()
    formats: Mapping[str, FormatChecker] = field(default_factory=dict)
    storage_backends: Sequence[StorageBackend[Any]] = ()

    def __post_init__(self) -> None:
        if self.api_version != API_VERSION:
            raise ValueError(
                f"contribution api_version {self.api_version} is not supported by this "
                f"dirigent-sdk (speaks {API_VERSION})"
            )
        for name in ("operators", "sensors", "connection_kinds", "notifiers", "storage_backends"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "formats", types.MappingProxyType(dict(self.formats)))
        self._check()

    def _check(self) -> None:
        block_ids: set[str] = set()
        expected: tuple[tuple[Sequence[object], type, type], ...] = (
            (self.operators, Operator, OperatorSpec),
            (self.sensors, Sensor, SensorSpec),
        )
        for blocks, base, spec_type in expected:
            for block in blocks:
                if not isinstance(block, base):
                    raise TypeError(f"{block!r} is not an instance of {base.__name__}")
                spec = getattr(type(block), "spec", None)
                if not isinstance(spec, spec_type) or not isinstance(spec, BlockSpec):
                    raise TypeError(
                        f"{type(block).__qualname__}.spec must be an instance of {spec_type.__name__}"
                    )
                _require_model(block, "config_model")
                _require_model(block, "output_model")
                for block_id in (spec.id, *spec.deprecated_aliases):
                    if block_id in block_ids:
                        raise ValueError(f"block id {block_id!r} is contributed twice")
                    block_ids.add(block_id)
        for items, base in (
            (self.connection_kinds, ConnectionKind),
            (self.notifiers, Notifier),
        ):
            seen: set[str] = set()
            for item in items:
                if not isinstance(item, base):
                    raise TypeError(f"{item!r} is not an instance of {base.__name__}")
                ident = getattr(type(item), "id", None)
                if not isinstance(ident, str) or not _PLUGIN_ID_RE.fullmatch(ident):
                    raise TypeError(
                        f"{type(item).__qualname__}.id must be dotted snake_case "
                        f"such as 'http', got {ident!r}"
                    )
                if ident in seen:
                    raise ValueError(f"{base.__name__} {ident!r} is contributed twice")
                seen.add(ident)
                _require_model(item, "config_model")
        for name, check in self.formats.items():
            if not isinstance(name, str) or not name or not callable(check):
                raise TypeError(f"format {name!r} must map a name to a callable")
        self._check_storage_backends()

    def _check_storage_backends(self) -> None:
        schemes: set[str] = set()
        for backend in self.storage_backends:
            if not isinstance(backend, StorageBackend):
                raise TypeError(f"{backend!r} is not an instance of StorageBackend")
            cls = type(backend)
            scheme = getattr(cls, "scheme", None)
            if not isinstance(scheme, str) or not _SCHEME_RE.fullmatch(scheme):
                raise TypeError(
                    f"{cls.__qualname__}.scheme must be a lower-case URI scheme such as "
                    f"'s3', got {scheme!r}"
                )
            if scheme in HOST_SCHEMES:
                raise ValueError(f"storage scheme {scheme!r} is the host's own")
            if scheme in schemes:
                raise ValueError(f"storage scheme {scheme!r} is contributed twice")
            schemes.add(scheme)
            _require_model(backend, "config_model")
            kind = getattr(cls, "connection_kind", None)
            if kind is not None and not (isinstance(kind, str) and _PLUGIN_ID_RE.fullmatch(kind)):
                raise TypeError(
                    f"{cls.__qualname__}.connection_kind must be a connection kind id or None, "
                    f"got {kind!r}"
                )


def _require_model(obj: object, attr: str) -> None:
    model = getattr(type(obj), attr, None)
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"{type(obj).__qualname__}.{attr} must be a pydantic model class")
