"""Run parameters: defaults from the pipeline's schema, then validation against it.

JSON Schema validation does not fill defaults, so this does, recursively through declared
object properties, before validating. Every problem is reported, located under ``params``.
"""

from __future__ import annotations

import copy
from typing import Any

from jsonschema import Draft202012Validator

from dirigent.engine.shapes.problems import Problem, problem
from dirigent.engine.shapes.storable import unstorable_path


def with_defaults(schema: dict[str, Any] | None, value: Any) -> Any:
    if not isinstance(schema, dict) or not isinstance(value, dict):
        return value
    out = dict(value)
    props = schema.get("properties")
    if isinstance(props, dict):
        for name, sub in props.items():
            if not isinstance(sub, dict):
                continue
            if name not in out and "default" in sub:
                out[name] = copy.deepcopy(sub["default"])
            if name in out:
                out[name] = with_defaults(sub, out[name])
    return out


def resolve_params(
    schema: dict[str, Any] | None, given: dict[str, Any]
) -> tuple[dict[str, Any], list[Problem]]:
    """The run's parameters with defaults applied, and what is wrong with them."""
    bad = unstorable_path(given)
    if bad is not None:
        return given, [
            problem(
                "run.params.unstorable",
                "this value holds a NUL character (or a lone surrogate), which cannot be "
                "stored; remove it",
                "params",
                *bad,
            )
        ]
    if schema is None:
        if given:
            names = ", ".join(sorted(given))
            return given, [
                problem(
                    "run.params.undeclared",
                    f"this pipeline declares no parameters, but got: {names}",
                    "params",
                )
            ]
        return {}, []
    params = with_defaults(schema, given)
    validator = Draft202012Validator(schema)
    problems = [
        problem("run.params.invalid", f"{err.message}", "params", *list(err.absolute_path))
        for err in sorted(
            validator.iter_errors(params), key=lambda e: list(map(str, e.absolute_path))
        )
    ]
    return params, problems
