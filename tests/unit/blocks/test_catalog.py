"""The built-in pack as the catalog sees it: closed schemas, owned error codes, the gate."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import pytest

from dirigent.blocks.jq import JqConfig, TransformJqOperator
from dirigent.blocks.kubernetes.client import RateLimiter
from dirigent.blocks.plugin import plugin
from dirigent.blocks.shell import ShellConfig, ShellRunOperator
from dirigent.sdk import Message

CONTRIBUTION = plugin.contribute()
BLOCKS = [*CONTRIBUTION.operators, *CONTRIBUTION.sensors]
UNSAFE = {"shell.run", "docker.run"}


def open_objects(schema: Any, path: str = "") -> list[str]:
    """Every object schema with properties that does not refuse unknown fields."""
    found: list[str] = []
    if isinstance(schema, dict):
        if "properties" in schema and schema.get("additionalProperties") is not False:
            found.append(path or "/")
        for key, value in schema.items():
            found += open_objects(value, f"{path}/{key}")
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            found += open_objects(value, f"{path}/{i}")
    return found


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.spec.id)
def test_published_schemas_refuse_unknown_fields(block: Any) -> None:
    assert open_objects(block.config_model.model_json_schema()) == []
    assert open_objects(block.output_model.model_json_schema(mode="serialization")) == []


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.spec.id)
def test_error_codes_belong_to_the_family(block: Any) -> None:
    module = sys.modules[type(block).__module__]
    codes = [v.code for v in vars(module).values() if isinstance(v, Message)]
    family = block.spec.id.split(".")[0]
    owners = {family, block.spec.group, "docker", "transform", "pipeline", "core"}
    assert all(code.split(".")[0] in owners for code in codes), codes


def test_only_blocks_that_run_code_are_gated() -> None:
    assert {b.spec.id for b in BLOCKS if b.spec.local_execution} == UNSAFE


def test_a_jq_program_that_does_not_compile_is_an_issue_with_the_compilers_words() -> None:
    [issue] = TransformJqOperator().check_config(JqConfig(program=".a |||"))
    assert issue.code == "transform.jq.compile"
    assert issue.location == ("program",)
    assert "syntax error" in issue.message


def test_shell_run_needs_exactly_one_of_command_and_script() -> None:
    block = ShellRunOperator()
    assert [i.code for i in block.check_config(ShellConfig())] == ["shell.command.missing"]
    both = ShellConfig(command=["true"], script="true")
    assert [i.code for i in block.check_config(both)] == ["shell.command.ambiguous"]


async def test_the_rate_limiter_keeps_to_its_qps_after_the_burst() -> None:
    limiter = RateLimiter(qps=50, burst=5)
    started = time.monotonic()
    await asyncio.gather(*(limiter.take() for _ in range(25)))
    # 5 from the burst, 20 more at 50/s: never sooner than 0.4 s.
    assert time.monotonic() - started >= 0.39
