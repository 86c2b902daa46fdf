"""Offline checks of one Pipeline: the DAG, the references, the params schema.

Every check appends to one list, so a document with several mistakes is answered with all
of them in one pass, each located at the field a person has to edit.
"""

from __future__ import annotations

from collections.abc import Iterator

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from dirigent.engine.shapes.manifests import dag
from dirigent.engine.shapes.manifests.pipeline import Pipeline, Step
from dirigent.engine.shapes.manifests.references import (
    Namespace,
    Reference,
    ReferenceError_,
    StepPart,
    find_references,
    parse_template,
)
from dirigent.engine.shapes.problems import Problem, problem


def check_pipeline(pipeline: Pipeline) -> list[Problem]:
    spec = pipeline.spec
    deps = {name: step.depends_on for name, step in spec.steps.items()}
    out: list[Problem] = []
    out += _check_edges(pipeline)
    # A step naming itself is reported once, as pipeline.dependency.self, not also as a cycle.
    cycle = dag.find_cycle({n: [d for d in ds if d != n] for n, ds in deps.items()})
    if cycle is not None:
        out.append(
            problem(
                "pipeline.dag.cycle",
                f"steps {' → '.join(cycle)} form a cycle; remove one of these dependsOn edges",
                "spec",
                "steps",
                cycle[0],
                "dependsOn",
                cycle=" → ".join(cycle),
            )
        )
    out += _check_params_schema(pipeline)
    declared = _declared_params(pipeline)
    for name, step in spec.steps.items():
        upstream = dag.ancestors(deps, name)
        out += _check_for_each(pipeline, name, step, upstream, declared)
        for path, found in find_references(step.config):
            where = ("spec", "steps", name, "config", *path)
            if isinstance(found, ReferenceError_):
                out.append(problem(f"pipeline.{found.code}", found.message, *where))
            else:
                out += _check_reference(pipeline, name, step, found, upstream, declared, where)
    out += _check_alerts(pipeline)
    out += _check_retry(pipeline)
    return out


def _check_edges(pipeline: Pipeline) -> Iterator[Problem]:
    steps = pipeline.spec.steps
    for name, step in steps.items():
        seen: set[str] = set()
        for i, dep in enumerate(step.depends_on):
            where = ("spec", "steps", name, "dependsOn", i)
            if dep == name:
                yield problem(
                    "pipeline.dependency.self", f"step '{name}' depends on itself", *where
                )
            elif dep not in steps:
                known = ", ".join(sorted(steps))
                yield problem(
                    "pipeline.dependency.unknown",
                    f"'{dep}' is not a step of this pipeline; steps are: {known}",
                    *where,
                    step=dep,
                )
            if dep in seen:
                yield problem("pipeline.dependency.duplicate", f"'{dep}' is listed twice", *where)
            seen.add(dep)


def _check_params_schema(pipeline: Pipeline) -> list[Problem]:
    schema = pipeline.spec.params
    if schema is None:
        return []
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as err:
        at = "/".join(str(p) for p in err.absolute_path)
        return [
            problem(
                "pipeline.params.schema_invalid",
                f"params is not a valid JSON Schema: {err.message}" + (f" (at {at})" if at else ""),
                "spec",
                "params",
                *list(err.absolute_path),
            )
        ]
    if schema.get("type", "object") != "object":
        return [
            problem(
                "pipeline.params.not_object",
                "params must describe an object (type: object): parameters are named",
                "spec",
                "params",
                "type",
            )
        ]
    return []


def _declared_params(pipeline: Pipeline) -> set[str] | None:
    """The parameter names the schema declares; None when the schema leaves the set open."""
    schema = pipeline.spec.params
    if schema is None:
        return set()
    props = schema.get("properties")
    if not isinstance(props, dict) or schema.get("additionalProperties", False) not in (
        False,
        None,
    ):
        return None
    return set(props)


def _check_reference(
    pipeline: Pipeline,
    name: str,
    step: Step,
    ref: Reference,
    upstream: set[str],
    declared: set[str] | None,
    where: tuple[str | int, ...],
) -> list[Problem]:
    steps = pipeline.spec.steps
    if ref.namespace is Namespace.PARAMS:
        param = ref.path[0]
        if declared is not None and param not in declared:
            hint = (
                f"declared: {', '.join(sorted(declared))}" if declared else "params declares none"
            )
            return [
                problem(
                    "pipeline.reference.unknown_param",
                    f"{ref} reads parameter '{param}', which the params schema does not declare ({hint})",
                    *where,
                    reference=str(ref),
                )
            ]
        return []
    if ref.namespace is Namespace.ITEM and step.for_each is None:
        return [
            problem(
                "pipeline.reference.item_without_for_each",
                f"{ref} is only available in a step with forEach",
                *where,
                reference=str(ref),
            )
        ]
    if ref.namespace is not Namespace.STEPS:
        return []
    assert ref.step is not None
    if ref.step not in steps:
        return [
            problem(
                "pipeline.reference.unknown_step",
                f"{ref} reads step '{ref.step}', which this pipeline does not have",
                *where,
                reference=str(ref),
                step=ref.step,
            )
        ]
    if ref.step not in upstream:
        return [
            problem(
                "pipeline.reference.not_upstream",
                f"{ref} reads step '{ref.step}', which is not upstream of '{name}'; "
                f"add '{ref.step}' to dependsOn (directly or through another step)",
                *where,
                reference=str(ref),
                step=ref.step,
            )
        ]
    if ref.part is StepPart.ITEM_OUTPUT and _for_each_pairs_with(step) != ref.step:
        return [
            problem(
                "pipeline.reference.item_unpaired",
                f"{ref} needs this step to map over the same grid: forEach: "
                f"${{steps.{ref.step}.items}}",
                *where,
                reference=str(ref),
            )
        ]
    return []


def _for_each_pairs_with(step: Step) -> str | None:
    """The step whose grid this step maps over (forEach: ${steps.x.items}), if any."""
    if not isinstance(step.for_each, str):
        return None
    try:
        template = parse_template(step.for_each)
    except ReferenceError_:
        return None
    if template.standalone:
        ref = template.references[0]
        if ref.namespace is Namespace.STEPS and ref.part is StepPart.ITEMS:
            return ref.step
    return None


def _check_for_each(
    pipeline: Pipeline, name: str, step: Step, upstream: set[str], declared: set[str] | None
) -> list[Problem]:
    value = step.for_each
    where = ("spec", "steps", name, "forEach")
    if value is None or isinstance(value, list):
        return []
    if not isinstance(value, str):
        return [
            problem(
                "pipeline.for_each.invalid",
                "forEach must be a list or one reference such as ${params.regions}",
                *where,
            )
        ]
    try:
        template = parse_template(value)
    except ReferenceError_ as err:
        return [problem(f"pipeline.{err.code}", err.message, *where)]
    if not template.standalone:
        return [
            problem(
                "pipeline.for_each.invalid",
                f"forEach must be exactly one reference, such as ${{params.regions}}; got {value!r}",
                *where,
            )
        ]
    ref = template.references[0]
    if ref.namespace is Namespace.STEPS and ref.part is not StepPart.ITEMS:
        return [
            problem(
                "pipeline.for_each.reads_output",
                f"forEach cannot read {ref}: items are drawn when the run is created, before any "
                "step has output; map over a parameter or ${steps.<step>.items}",
                *where,
            )
        ]
    if ref.namespace in (Namespace.ITEM, Namespace.ARTIFACTS):
        return [
            problem(
                "pipeline.for_each.invalid",
                f"forEach cannot read {ref}; map over a parameter, a run field or ${{steps.<step>.items}}",
                *where,
            )
        ]
    if ref.namespace is Namespace.STEPS:
        assert ref.step is not None
        target = pipeline.spec.steps.get(ref.step)
        if target is not None and target.for_each is None:
            return [
                problem(
                    "pipeline.for_each.not_a_fan_out",
                    f"{ref} has no grid: step '{ref.step}' has no forEach",
                    *where,
                )
            ]
    return _check_reference(pipeline, name, step, ref, upstream, declared, where)


def _check_alerts(pipeline: Pipeline) -> list[Problem]:
    seen: set[str] = set()
    out: list[Problem] = []
    for i, alert in enumerate(pipeline.spec.alerts):
        if alert.name in seen:
            out.append(
                problem(
                    "pipeline.alert.duplicate",
                    f"alert name '{alert.name}' is used twice",
                    "spec",
                    "alerts",
                    i,
                    "name",
                )
            )
        seen.add(alert.name)
    return out


def _check_retry(pipeline: Pipeline) -> list[Problem]:
    out: list[Problem] = []
    for name, step in pipeline.spec.steps.items():
        if step.retry is not None and step.retry.backoff > step.retry.max_backoff:
            out.append(
                problem(
                    "pipeline.retry.backoff_exceeds_max",
                    f"backoff {step.retry.backoff} is longer than maxBackoff {step.retry.max_backoff}",
                    "spec",
                    "steps",
                    name,
                    "retry",
                    "backoff",
                )
            )
    return out
