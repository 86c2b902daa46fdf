"""The jq transforms: ``transform.jq``, ``map.jq`` and ``filter.jq``, one group (transform).

A transform's id is ``<verb>.<kind>``: the verb is the promise (transform reshapes a whole
value, map is element-wise and keeps the length, filter returns a subset with elements
unmodified), the kind is the engine that keeps it. jq evaluates a program without running
code, so these need no unsafe gate. A program that does not compile is refused at apply by
``check_config`` with the compiler's message; at run time the input is any JSON value, its
references already resolved by the engine. Programs run in a child process from a pool the
three operators share (``programs.pool``): a program that never ends is killed at the step's
timeout, and the worker's other attempts and its lease heartbeat go on meanwhile.
"""

from __future__ import annotations

from typing import Any, ClassVar

import jq
from pydantic import BaseModel, Field, JsonValue

from dirigent.blocks.base import Config, Output, has_reference
from dirigent.blocks.programs.pool import ChildPool
from dirigent.sdk import (
    BlockFailure,
    ErrorClass,
    Issue,
    Message,
    Operator,
    OperatorSpec,
    StepContext,
)

__all__ = ["CHILD", "FilterJqOperator", "MapJqOperator", "TransformJqOperator"]

CHILD = "dirigent.blocks.programs.jqchild"

COMPILE = Message("transform.jq.compile", "the jq program does not compile: {error}")
RUNTIME = Message("transform.jq.runtime", "the jq program failed on its input: {error}")
NOT_A_LIST = Message("transform.jq.not_a_list", "{verb}.jq needs a list as input, got {kind}")
MAP_ONE = Message(
    "transform.jq.map_one",
    "map.jq must yield exactly one value per element; element {index} yielded {count}",
)
FILTER_BOOL = Message(
    "transform.jq.filter_bool",
    "filter.jq's program must yield true or false per element; element {index} yielded {value}",
)


class JqConfig(Config):
    program: str = Field(description="A jq program, e.g. '.rows | map(.id)'.")
    input: JsonValue = Field(default=None, description="Any JSON value; references resolved.")


class TransformOutput(Output):
    value: JsonValue = Field(description="The program's single result (or a list of several).")


class ListOutput(Output):
    items: list[JsonValue]
    count: int


async def _results(pool: ChildPool, program: str, inputs: list[JsonValue]) -> list[list[Any]]:
    """Every result of ``program`` for each input, evaluated in a child process."""
    answer = await pool.call({"program": program, "inputs": inputs})
    if "error" in answer:
        message = COMPILE if answer["error"] == "compile" else RUNTIME
        raise BlockFailure(message, error_class=ErrorClass.REJECTED, error=answer["message"])
    results: list[list[Any]] = answer["results"]
    return results


def _list_input(config: JqConfig, verb: str) -> list[JsonValue]:
    if not isinstance(config.input, list):
        raise BlockFailure(
            NOT_A_LIST, error_class=ErrorClass.REJECTED, verb=verb, kind=type(config.input).__name__
        )
    return config.input


class _Jq:
    config_model: ClassVar[type[BaseModel]] = JqConfig

    def __init__(self, pool: ChildPool | None = None) -> None:
        self.pool = pool or ChildPool(CHILD)

    def check_config(self, config: JqConfig) -> list[Issue]:
        if has_reference(config.program):
            return []
        try:
            jq.compile(config.program)
        except ValueError as err:
            return [Issue.of(COMPILE, location=("program",), error=str(err))]
        return []


class TransformJqOperator(_Jq, Operator[JqConfig, TransformOutput]):
    """Reshapes a whole value with a jq program."""

    spec: ClassVar[OperatorSpec] = OperatorSpec(
        id="transform.jq",
        group="transform",
        summary="Reshape a JSON value with a jq program.",
        description="One result is the output's value; several become a list.",
        idempotent=True,
    )
    output_model: ClassVar[type[BaseModel]] = TransformOutput

    async def execute(self, config: JqConfig, ctx: StepContext) -> TransformOutput:
        [results] = await _results(self.pool, config.program, [config.input])
        return TransformOutput(value=results[0] if len(results) == 1 else results)


class MapJqOperator(_Jq, Operator[JqConfig, ListOutput]):
    """Applies a jq program to each element of a list; one result per element."""

    spec: ClassVar[OperatorSpec] = OperatorSpec(
        id="map.jq",
        group="transform",
        summary="Apply a jq program to each element of a list (same length out).",
        idempotent=True,
    )
    output_model: ClassVar[type[BaseModel]] = ListOutput

    async def execute(self, config: JqConfig, ctx: StepContext) -> ListOutput:
        elements = _list_input(config, "map")
        out: list[JsonValue] = []
        for index, results in enumerate(await _results(self.pool, config.program, elements)):
            if len(results) != 1:
                raise BlockFailure(
                    MAP_ONE, error_class=ErrorClass.REJECTED, index=index, count=len(results)
                )
            out.append(results[0])
        return ListOutput(items=out, count=len(out))


class FilterJqOperator(_Jq, Operator[JqConfig, ListOutput]):
    """Keeps the elements of a list for which a jq program yields true."""

    spec: ClassVar[OperatorSpec] = OperatorSpec(
        id="filter.jq",
        group="transform",
        summary="Keep the elements of a list for which a jq program yields true.",
        idempotent=True,
    )
    output_model: ClassVar[type[BaseModel]] = ListOutput

    async def execute(self, config: JqConfig, ctx: StepContext) -> ListOutput:
        elements = _list_input(config, "filter")
        kept: list[JsonValue] = []
        answers = await _results(self.pool, config.program, elements)
        for index, (element, results) in enumerate(zip(elements, answers, strict=True)):
            if len(results) != 1 or not isinstance(results[0], bool):
                raise BlockFailure(
                    FILTER_BOOL, error_class=ErrorClass.REJECTED, index=index, value=results
                )
            if results[0]:
                kept.append(element)
        return ListOutput(items=kept, count=len(kept))
