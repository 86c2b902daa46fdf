"""Checks of a Schedule or Webhook against the Pipeline it names.

They run wherever both are known: ``dirigent validate`` when both files are given, and the
engine's apply against the stored pipeline. A webhook that could never fire successfully is
caught when it is declared, not by its first delivery.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

from dirigent.engine.shapes.manifests.pipeline import Pipeline
from dirigent.engine.shapes.manifests.schedule import Schedule
from dirigent.engine.shapes.manifests.webhook import Webhook
from dirigent.engine.shapes.problems import Problem, problem


def _schema(pipeline: Pipeline) -> dict[str, Any]:
    return dict(
        pipeline.spec.params or {"type": "object", "properties": {}, "additionalProperties": False}
    )


def check_webhook_against(webhook: Webhook, pipeline: Pipeline) -> list[Problem]:
    schema = _schema(pipeline)
    props = schema.get("properties") or {}
    required = schema.get("required") or []
    out: list[Problem] = []
    for name in webhook.spec.params_from_payload:
        if name not in props:
            declared = ", ".join(sorted(props)) or "none"
            out.append(
                problem(
                    "webhook.mapping.param_unknown",
                    f"'{name}' is not a parameter of pipeline '{pipeline.metadata.name}' (declared: {declared})",
                    "spec",
                    "paramsFromPayload",
                    name,
                    param=name,
                )
            )
    for name in required:
        sub = props.get(name)
        has_default = isinstance(sub, dict) and "default" in sub
        if name not in webhook.spec.params_from_payload and not has_default:
            out.append(
                problem(
                    "webhook.mapping.required_unmapped",
                    f"pipeline '{pipeline.metadata.name}' requires parameter '{name}', which has no default "
                    "and nothing in paramsFromPayload maps; map it from the payload or give it a default",
                    "spec",
                    "paramsFromPayload",
                    param=name,
                )
            )
    return out


def check_schedule_against(schedule: Schedule, pipeline: Pipeline) -> list[Problem]:
    validator = Draft202012Validator(_schema(pipeline))
    out: list[Problem] = []
    for err in sorted(
        validator.iter_errors(schedule.spec.params), key=lambda e: list(e.absolute_path)
    ):
        out.append(
            problem(
                "schedule.params.invalid",
                f"params do not fit pipeline '{pipeline.metadata.name}': {err.message}",
                "spec",
                "params",
                *[p for p in err.absolute_path],
            )
        )
    return out
