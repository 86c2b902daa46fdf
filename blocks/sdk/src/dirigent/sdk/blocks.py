"""Blocks: the two base classes a third party subclasses, ``Operator`` and ``Sensor``.

Why two classes on one mechanism: both park as waiting and both are probed by whichever
worker is free, but an operator tracks work this run submitted (a handle, failure means the
work failed, cancel reaches the remote), while a sensor waits for a condition nobody in the
run caused (no handle, timeout is an expected outcome, cancel is local). One class with
optional handles would thread that difference through the engine forever.

Operator rules the engine relies on:

* ``execute`` is called at most once per attempt (a retry is a new attempt), submits at most
  one unit of remote work and never polls; it returns the output, or a ``RemoteHandle``.
* An operator that ever returns a ``RemoteHandle`` must implement ``probe`` and ``fetch``;
  the defaults raise ``NotImplementedError`` (classified rejected). ``probe`` is
  side-effect-free and callable any number of times from any worker. ``fetch`` runs after a
  SUCCEEDED probe and may run more than once: retrieve a result, never consume one.
* ``cancel`` is best-effort and idempotent; the default reaches nothing and returns False.

Sensor rules: ``poke`` is read-only and short (seconds, never sleeps), and may be called any
number of times. Returning ``NotYet`` is not an error; raising is.

Both: ``check_config`` reports, at apply time, refusals the config's JSON Schema cannot
express (default: none); ``classify_error`` sorts an exception the block raised (default:
``classify_default``). Blocks are instantiated once per process and shared across steps and
concurrent calls, so they hold no per-call state.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar, Generic, Literal, TypeVar

from pydantic import BaseModel

from dirigent.sdk.errors import ErrorClass, classify_default

if TYPE_CHECKING:
    from dirigent.sdk.context import StepContext
    from dirigent.sdk.issues import Issue
    from dirigent.sdk.results import NotYet, ProbeResult, RemoteHandle
    from dirigent.sdk.specs import OperatorSpec, SensorSpec

__all__ = ["ConfigT", "Operator", "OutputT", "Sensor", "block_kind"]

ConfigT = TypeVar("ConfigT", bound=BaseModel)
OutputT = TypeVar("OutputT", bound=BaseModel)


class Operator(ABC, Generic[ConfigT, OutputT]):
    """One unit of work: finish with an output, or return a ``RemoteHandle`` to probe.

    Subclasses set ``spec``, ``config_model`` and ``output_model`` and implement
    ``execute``; see the module docstring for the rules each method must keep.
    """

    spec: ClassVar[OperatorSpec]
    config_model: ClassVar[type[BaseModel]]
    output_model: ClassVar[type[BaseModel]]

    @abstractmethod
    async def execute(self, config: ConfigT, ctx: StepContext) -> OutputT | RemoteHandle:
        """Do the work (or submit it) once for this attempt."""

    async def probe(self, handle: RemoteHandle, config: ConfigT, ctx: StepContext) -> ProbeResult:
        """Report the remote work's state; no side effects."""
        raise NotImplementedError(
            f"{type(self).__name__} returned a RemoteHandle but does not implement probe()"
        )

    async def fetch(self, handle: RemoteHandle, config: ConfigT, ctx: StepContext) -> OutputT:
        """Retrieve the finished remote work's output (at-least-once)."""
        raise NotImplementedError(
            f"{type(self).__name__} returned a RemoteHandle but does not implement fetch()"
        )

    async def cancel(self, handle: RemoteHandle, config: ConfigT, ctx: StepContext) -> bool:
        """Ask the remote system to stop; True if the request was made. Best-effort."""
        return False

    def classify_error(self, error: Exception) -> ErrorClass:
        """How the retry policy treats ``error``; default ``classify_default``."""
        return classify_default(error)

    def check_config(self, config: ConfigT) -> list[Issue]:
        """Apply-time refusals the config schema cannot express; default none."""
        return []


class Sensor(ABC, Generic[ConfigT, OutputT]):
    """Waits for the world. Each poke is one durable, scheduled check; it never blocks.

    Subclasses set ``spec``, ``config_model`` and ``output_model`` and implement ``poke``.
    The engine owns the interval, the deadline and what a timeout means.
    """

    spec: ClassVar[SensorSpec]
    config_model: ClassVar[type[BaseModel]]
    output_model: ClassVar[type[BaseModel]]

    @abstractmethod
    async def poke(self, config: ConfigT, ctx: StepContext) -> OutputT | NotYet:
        """Check the condition once: the output if it holds, else ``NotYet``."""

    def classify_error(self, error: Exception) -> ErrorClass:
        """How the retry policy treats ``error``; default ``classify_default``."""
        return classify_default(error)

    def check_config(self, config: ConfigT) -> list[Issue]:
        """Apply-time refusals the config schema cannot express; default none."""
        return []


def block_kind(block: object) -> Literal["operator", "sensor"]:
    """Whether ``block`` (an instance or a class) is an operator or a sensor."""
    cls = block if isinstance(block, type) else type(block)
    if issubclass(cls, Operator):
        return "operator"
    if issubclass(cls, Sensor):
        return "sensor"
    raise TypeError(f"{cls.__qualname__} is neither an Operator nor a Sensor")
