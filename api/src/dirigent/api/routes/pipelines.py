"""Pipelines of a namespace: listing, detail, versions, export, re-check, run, apply."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query, Response
from fastapi.responses import PlainTextResponse
from pydantic import Field

from dirigent.api.auth import Permission
from dirigent.api.deps import (
    After,
    AuthDep,
    CanApplyPipelines,
    CanGetPipelines,
    CanListPipelines,
    CanRunPipelines,
    EngineDep,
    IdempotencyKey,
    Limit,
    Namespace,
    PipelineName,
    authorize,
)
from dirigent.api.models import (
    ApplyPlan,
    ManifestDocument,
    Page,
    PipelineDetail,
    PipelineSummary,
    PipelineVersionView,
    RunCreatedView,
    RunRequestBody,
    StepChanges,
    ValidationReport,
)
from dirigent.api.problems import ApiProblem, documented, not_found
from dirigent.engine import RunRequest
from dirigent.engine.shapes.manifests.loading import parse_manifest
from dirigent.engine.shapes.problems import ProblemsError, problem

router = APIRouter(prefix="/namespaces/{namespace}/pipelines", tags=["pipelines"])

CARRY_SECRETS = ("Connection", "Webhook")
# $apply is the door (create pipelines/apply); what comes through it also needs the right
# `kubectl apply` of the same document would need, so the door grants nothing more than RBAC.
RESOURCE_OF_KIND = {
    "Pipeline": "pipelines",
    "Schedule": "schedules",
    "Webhook": "webhooks",
    "Connection": "connections",
}


class ApplyDocument(ManifestDocument):
    """A manifest, and for a Connection or Webhook the values its ``secretKeyRef``s name.

    A cluster keeps those values in Secrets that the operator reads; a client without one
    (``dirigent apply -f`` over a folder holding ``v1`` Secret documents) resolves them itself
    and sends them here. They are sealed at rest like the operator's, never stored in plain,
    never echoed back. A Webhook's ``token`` is sent only when minting or rotating it.
    """

    secret_values: dict[str, str] | None = Field(
        default=None,
        alias="secretValues",
        description="Connection: secret field -> value; Webhook: token and hmacSecret.",
    )


@router.get("", operation_id="listPipelines", summary="List pipelines with their run summary")
async def list_pipelines(
    engine: EngineDep,
    _: CanListPipelines,
    namespace: Namespace,
    limit: Limit = 50,
    after: After = None,
) -> Page[PipelineSummary]:
    return await engine.pipelines.page(namespace, cursor=after, limit=limit)


@router.post(
    "/$apply",
    operation_id="applyManifest",
    summary="Apply a manifest (or plan it with dry_run)",
)
async def apply_manifest(
    engine: EngineDep,
    auth: AuthDep,
    principal: CanApplyPipelines,
    namespace: Namespace,
    document: Annotated[ApplyDocument, Body(description="The whole manifest, as JSON.")],
    dry_run: Annotated[bool, Query(description="Plan only; nothing is written.")] = False,
) -> ApplyPlan:
    body = document.model_dump(mode="json", by_alias=True, exclude={"secret_values"})
    manifest, problems = parse_manifest(body)
    if manifest is None:
        raise ProblemsError(problems)
    _check_applicable(manifest.kind, manifest.metadata.namespace, namespace, document)
    kind_right = Permission("create", RESOURCE_OF_KIND[manifest.kind])
    await authorize(auth, principal, kind_right, namespace)
    plan = await engine.manifests.plan(manifest, namespace)
    applied = await engine.manifests.apply(
        manifest,
        namespace,
        secret_values=document.secret_values,
        provenance={"source": "api", "by": principal.name},
        dry_run=dry_run,
    )
    return ApplyPlan(
        kind=applied.kind,
        name=applied.name,
        namespace=namespace,
        action=applied.action.value,
        dry_run=dry_run,
        version=applied.version,
        digest=applied.digest,
        previous_digest=plan.previous_digest,
        steps=StepChanges(
            added=plan.steps_added, removed=plan.steps_removed, changed=plan.steps_changed
        ),
        changed_fields=plan.changed_fields,
    )


@router.api_route("/$apply", methods=["GET", "PUT", "PATCH", "DELETE"], include_in_schema=False)
async def apply_other_methods() -> None:
    """Without this, GET /pipelines/$apply would be read as a pipeline named "$apply"."""
    raise ApiProblem(
        405,
        "method.not_allowed",
        "$apply takes POST with a manifest as its body",
        headers={"Allow": "POST"},
    )


def _check_applicable(
    kind: str, declared: str | None, namespace: str, document: ApplyDocument
) -> None:
    if document.secret_values is not None and kind not in CARRY_SECRETS:
        raise ProblemsError(
            [
                problem(
                    "apply.secrets.unexpected",
                    f"a {kind} has no secretKeyRefs: drop secretValues",
                    "secretValues",
                )
            ]
        )
    if declared and declared != namespace:
        raise ProblemsError(
            [
                problem(
                    "apply.namespace.mismatch",
                    f"the manifest names namespace {declared} but was sent to {namespace}; "
                    "drop metadata.namespace or send it to its own namespace",
                    "metadata",
                    "namespace",
                )
            ]
        )


@router.get("/{name}", operation_id="getPipeline", summary="One pipeline and its current document")
async def get_pipeline(
    engine: EngineDep, _: CanGetPipelines, namespace: Namespace, name: PipelineName
) -> PipelineDetail:
    summary = await engine.pipelines.summary(namespace, name)
    record = await engine.pipelines.get(namespace, name)
    if summary is None or record is None:
        raise not_found("pipeline", name, namespace)
    return PipelineDetail(summary=summary, document=record.document)


@router.get(
    "/{name}/versions", operation_id="listPipelineVersions", summary="A pipeline's versions"
)
async def list_versions(
    engine: EngineDep,
    _: CanGetPipelines,
    namespace: Namespace,
    name: PipelineName,
    limit: Limit = 50,
    after: After = None,
) -> Page[PipelineVersionView]:
    page = await engine.pipelines.versions(namespace, name, cursor=after, limit=limit)
    if page is None:
        raise not_found("pipeline", name, namespace)
    return page


@router.get(
    "/{name}/$export",
    operation_id="exportPipeline",
    summary="The canonical YAML of a version",
    response_class=PlainTextResponse,
    responses={200: {"content": {"application/yaml": {"schema": {"type": "string"}}}}},
)
async def export_pipeline(
    engine: EngineDep,
    _: CanGetPipelines,
    namespace: Namespace,
    name: PipelineName,
    version: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
) -> Response:
    text = await engine.pipelines.export(namespace, name, version)
    if text is None:
        what = f"{name} version {version}" if version else name
        raise not_found("pipeline", what, namespace)
    return Response(text, media_type="application/yaml")


@router.post(
    "/{name}/$validate",
    operation_id="validatePipeline",
    summary="Re-check the current version against the installed catalog",
)
async def validate_pipeline(
    engine: EngineDep, _: CanGetPipelines, namespace: Namespace, name: PipelineName
) -> ValidationReport:
    problems = await engine.pipelines.check_stored(namespace, name)
    if problems is None:
        raise not_found("pipeline", name, namespace)
    return ValidationReport(valid=not problems, problems=problems)


@router.post(
    "/{name}/$run",
    operation_id="runPipeline",
    summary="Start a run; params are validated against the pipeline's schema",
    status_code=201,
    responses={
        200: {"model": RunCreatedView, "description": "An earlier run, by key."},
        **documented(409),
    },
)
async def run_pipeline(
    engine: EngineDep,
    principal: CanRunPipelines,
    namespace: Namespace,
    name: PipelineName,
    response: Response,
    idempotency_key: IdempotencyKey = None,
    body: RunRequestBody | None = None,
) -> RunCreatedView:
    request = RunRequest(
        namespace,
        name,
        (body or RunRequestBody()).params,
        triggered_by_kind="api",
        triggered_by_ref=principal.name,
        idempotency_key=f"{namespace}/{name}/{idempotency_key}" if idempotency_key else None,
    )
    created = await engine.runs.start(request)
    if not created.created:
        response.status_code = 200
    return RunCreatedView(
        run_id=created.run_id,
        status=created.status,
        created=created.created,
        replaced=list(created.replaced),
    )
