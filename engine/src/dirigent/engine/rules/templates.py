"""Alert and report templates: sandboxed Jinja, compiled at apply, degraded on render.

A template that does not compile is refused where it was written (apply), so a typo is
answered there rather than in place of a message. Rendering happens later, over a snapshot of
the run's facts, in Jinja's sandbox; a name the facts lack renders empty (half of a run's
facts are legitimately null depending on how it ended). A render that fails or overflows its
cap raises ``RenderError``, and the caller falls back to the default text with a warning in
the run's timeline: an alert is the last thing between a failure and the person who needs it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from jinja2 import ChainableUndefined, TemplateError
from jinja2.sandbox import SandboxedEnvironment

from dirigent.engine.infrastructure.plugins import Catalog
from dirigent.engine.shapes.manifests.pipeline import Pipeline
from dirigent.engine.shapes.problems import Problem, problem

SUBJECT_MAX = 1024
BODY_MAX = 64 * 1024

DEFAULT_SUBJECT = "[dirigent] {{ run.pipeline }} run {{ run.id }} {{ run.status }}"
DEFAULT_BODY = """\
Pipeline {{ run.namespace }}/{{ run.pipeline }}, run {{ run.id }}: {{ run.status }}.
{% if run.failed_step %}Failed step: {{ run.failed_step }}
{% endif %}{% if run.error %}Error: {{ run.error }}
{% endif %}{% if run.report_url %}Report: {{ run.report_url }}
{% endif %}"""
DEFAULT_REPORT = """\
# {{ run.pipeline }} — run {{ run.id }}

**Status:** {{ run.status }}{% if run.duration_seconds is not none %} \
in {{ "%.1f"|format(run.duration_seconds) }} s{% endif %}
**Triggered by:** {{ run.trigger.kind }}{% if run.trigger.ref %} ({{ run.trigger.ref }}){% endif %}
{% if run.window %}**Window:** {{ run.window.start }} — {{ run.window.end }}
{% endif %}{% if run.error %}
**Error:** {{ run.error }}{% if run.failed_step %} (step `{{ run.failed_step }}`){% endif %}
{% endif %}
| Step | Status | Attempts | Items |
|---|---|---|---|
{% for s in run.steps %}| {{ s.name }} | {{ s.status }} | {{ s.attempts }} | \
{% if s.items is not none %}{{ s.items_succeeded }}/{{ s.items }}{% else %}—{% endif %} |
{% endfor %}"""


class RenderError(Exception):
    """A template could not be rendered within its sandbox and size cap."""


def environment() -> SandboxedEnvironment:
    return SandboxedEnvironment(undefined=ChainableUndefined, autoescape=False)


_ENV = environment()


def compile_error(source: str) -> str | None:
    """None when ``source`` compiles, else why not (with the line)."""
    try:
        _ENV.from_string(source)
    except TemplateError as err:
        line = getattr(err, "lineno", None)
        return f"{err}" + (f" (line {line})" if line else "")
    return None


def render(source: str, context: Mapping[str, Any], limit: int) -> str:
    try:
        text = _ENV.from_string(source).render(**context)
    except Exception as err:  # sandbox refusals, filters raising on odd facts, anything
        raise RenderError(f"{type(err).__name__}: {err}") from err
    if len(text.encode()) > limit:
        raise RenderError(f"rendered {len(text.encode())} bytes, more than the cap of {limit}")
    return text


def check_alerting(
    pipeline: Pipeline, catalog: Catalog, *, connections: Collection[str]
) -> list[Problem]:
    """Templates compile, notifiers are installed, named connections exist."""
    out: list[Problem] = []
    if pipeline.spec.report is not None and pipeline.spec.report.template is not None:
        why = compile_error(pipeline.spec.report.template)
        if why is not None:
            out.append(
                problem(
                    "pipeline.report.template_invalid",
                    f"the report template does not compile: {why}",
                    "spec",
                    "report",
                    "template",
                )
            )
    for i, alert in enumerate(pipeline.spec.alerts):
        where = ("spec", "alerts", i)
        for name in ("subject", "body"):
            source = getattr(alert, name)
            why = compile_error(source) if source is not None else None
            if why is not None:
                out.append(
                    problem(
                        "pipeline.alert.template_invalid",
                        f"the alert's {name} does not compile: {why}",
                        *where,
                        name,
                    )
                )
        if alert.notifier not in catalog.notifiers:
            known = ", ".join(sorted(catalog.notifiers)) or "none installed"
            out.append(
                problem(
                    "pipeline.alert.notifier_unknown",
                    f"notifier '{alert.notifier}' is not installed (installed: {known})",
                    *where,
                    "notifier",
                )
            )
        if alert.connection is not None and alert.connection not in connections:
            out.append(
                problem(
                    "pipeline.alert.connection_unknown",
                    f"connection '{alert.connection}' does not exist in this namespace",
                    *where,
                    "connection",
                )
            )
    return out
