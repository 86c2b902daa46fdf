"""docker.run: the installation decides where a Job runs, as whom, and how it is labelled.

A step naming a namespace or ServiceAccount no tenant may use is refused at apply, located
at the field; the per-namespace rule is kept when the Job is made (the pipeline's namespace
known). Labels: dirigent's and Kubernetes' domains refused, plain keys written under
``author.dirigent.dev/``, allow-listed keys kept.
"""

from __future__ import annotations

import pytest

from dirigent.blocks.kubernetes.docker import DockerRunOperator, KubeSettings
from dirigent.blocks.kubernetes.jobs import DockerConfig, job_manifest
from dirigent.blocks.kubernetes.tenancy import Placement, place
from dirigent.engine import build_catalog, check_against_catalog
from dirigent.engine.shapes.manifests.loading import parse_manifest, read_text
from dirigent.engine.shapes.manifests.pipeline import Pipeline
from dirigent.sdk import BlockFailure, Contribution, ErrorClass
from tests.unit.sdk.fakes import make_context

TEAMS = {
    "team-a": Placement.model_validate(
        {
            "namespace": "team-a-jobs",
            "namespaces": ["team-a-batch-*"],
            "serviceAccount": "dirigent-job",
            "serviceAccounts": ["deployer"],
        }
    ),
    "*": Placement(),
}


def problems(config: str, settings: KubeSettings) -> list[tuple[str, str]]:
    docs, _ = read_text(
        "apiVersion: dirigent.dev/v1alpha1\nkind: Pipeline\nmetadata: {name: p}\n"
        f"spec:\n  steps:\n    job: {{block: docker.run, config: {config}}}\n"
    )
    pipeline, found = parse_manifest(docs[0].data)
    assert isinstance(pipeline, Pipeline), found
    catalog = build_catalog(
        [("dirigent-blocks", Contribution(operators=[DockerRunOperator(settings)]))]
    )
    refused = check_against_catalog(pipeline, catalog, enabled_unsafe={"docker.run"})
    return [(p.code, p.location) for p in refused]


def test_with_no_placement_a_step_may_name_no_namespace_and_no_account() -> None:
    assert problems("{image: busybox, namespace: kube-system}", KubeSettings()) == [
        ("docker.namespace.refused", "spec.steps.job.config.namespace")
    ]
    assert problems("{image: busybox, serviceAccount: operator}", KubeSettings()) == [
        ("docker.service_account.refused", "spec.steps.job.config.serviceAccount")
    ]
    assert problems("{image: busybox}", KubeSettings()) == []


def test_a_namespace_or_account_some_tenant_may_use_passes_apply() -> None:
    settings = KubeSettings(placement=TEAMS)
    config = "{image: busybox, namespace: team-a-batch-1, serviceAccount: deployer}"
    assert problems(config, settings) == []
    assert problems("{image: busybox, namespace: team-b}", settings) == [
        ("docker.namespace.refused", "spec.steps.job.config.namespace")
    ]


def test_a_reference_is_checked_when_the_job_is_made_not_at_apply() -> None:
    assert problems("{image: busybox, namespace: '${params.ns}'}", KubeSettings()) == []


def test_placement_follows_the_pipelines_namespace() -> None:
    placed = place(None, None, "team-a", TEAMS)
    assert (placed.namespace, placed.service_account, placed.mount_token) == (
        "team-a-jobs",
        "dirigent-job",
        False,
    )
    named = place("team-a-batch-7", "deployer", "team-a", TEAMS)
    assert (named.namespace, named.service_account, named.mount_token) == (
        "team-a-batch-7",
        "deployer",
        True,
    )
    other = place(None, None, "team-b", TEAMS)  # "*": its own namespace, no account named
    assert (other.namespace, other.service_account, other.mount_token) == ("team-b", None, False)


@pytest.mark.parametrize(
    ("namespace", "account", "pipeline_namespace", "code"),
    [
        ("team-a-batch-1", None, "team-b", "docker.namespace.refused"),  # team-a's, not b's
        ("kube-system", None, "team-a", "docker.namespace.refused"),
        (None, "deployer", "team-b", "docker.service_account.refused"),
        (None, "default", "team-a", "docker.service_account.refused"),
    ],
)
def test_what_the_pipelines_namespace_may_not_use_is_refused_when_the_job_is_made(
    namespace: str | None, account: str | None, pipeline_namespace: str, code: str
) -> None:
    with pytest.raises(BlockFailure) as refused:
        place(namespace, account, pipeline_namespace, TEAMS)
    assert refused.value.code == code
    assert refused.value.error_class is ErrorClass.REJECTED
    assert refused.value.message.startswith("config.")  # located in the step's config
    assert f"namespace '{pipeline_namespace}'" in refused.value.message


def test_naming_the_namespace_the_installation_gives_anyway_is_fine() -> None:
    assert place("team-b", None, "team-b", TEAMS).namespace == "team-b"


def test_placement_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "DIRIGENT_KUBE_PLACEMENT", '{"team-a": {"namespace": "jobs", "serviceAccounts": ["x"]}}'
    )
    assert KubeSettings().placement["team-a"].namespace == "jobs"
    assert KubeSettings().placement["team-a"].service_accounts == ["x"]


@pytest.mark.parametrize(
    ("labels", "code"),
    [
        ({"dirigent.dev/run": "1"}, "docker.label.reserved"),  # pass for another run's Job
        ({"dirigent.dev/installation": "other"}, "docker.label.reserved"),
        ({"app.kubernetes.io/name": "postgres"}, "docker.label.reserved"),
        ({"node-role.kubernetes.io/control-plane": ""}, "docker.label.reserved"),
        ({"job-name": "someone-elses"}, "docker.label.reserved"),
        ({"example.com/team": "a"}, "docker.label.prefixed"),
    ],
)
def test_labels_a_step_may_not_set_are_refused_at_apply_located(
    labels: dict[str, str], code: str
) -> None:
    [key] = labels
    config = f"{{image: busybox, labels: {{'{key}': '{labels[key]}'}}}}"
    assert problems(config, KubeSettings()) == [(code, f"spec.steps.job.config.labels.{key}")]


@pytest.mark.parametrize(
    "key",
    [
        "container.apparmor.security.beta.kubernetes.io/main",
        "seccomp.security.alpha.kubernetes.io/pod",
        "dirigent.dev/installation",
        "dirigent.dev/network-destinations",
    ],
)
def test_annotations_that_change_the_pods_confinement_or_dirigents_own_are_refused(
    key: str,
) -> None:
    config = f"{{image: busybox, annotations: {{'{key}': 'unconfined'}}}}"
    assert problems(config, KubeSettings()) == [
        ("docker.annotation.reserved", f"spec.steps.job.config.annotations.{key}")
    ]


def test_an_allow_list_opens_a_kubernetes_annotation_and_a_prefixed_label() -> None:
    settings = KubeSettings(
        allowed_annotations=["cluster-autoscaler.kubernetes.io/*"],
        allowed_labels=["example.com/*"],
    )
    config = (
        "{image: busybox, labels: {'example.com/team': a}, annotations: "
        "{'cluster-autoscaler.kubernetes.io/safe-to-evict': 'false', 'note': x}}"
    )
    assert problems(config, settings) == []


def job_labels(labels: dict[str, str], settings: KubeSettings) -> dict[str, str]:
    config = DockerConfig.model_validate({"image": "busybox", "labels": labels})
    body = job_manifest(config, make_context(), "ns", settings.pod_policy())
    pod_labels: dict[str, str] = body["spec"]["template"]["metadata"]["labels"]
    assert pod_labels == body["metadata"]["labels"]
    return pod_labels


def test_plain_author_labels_are_written_under_the_author_prefix() -> None:
    got = job_labels({"app": "postgres", "team": "a"}, KubeSettings())
    assert got["author.dirigent.dev/app"] == "postgres"
    assert got["author.dirigent.dev/team"] == "a"
    assert "app" not in got and "team" not in got  # no Service selecting app=postgres finds it


def test_allow_listed_labels_are_kept_as_written() -> None:
    got = job_labels(
        {"team": "a", "example.com/cost": "x"},
        KubeSettings(allowed_labels=["team", "example.com/*"]),
    )
    assert got["team"] == "a" and got["example.com/cost"] == "x"


async def test_the_worker_refuses_a_reserved_label_even_if_apply_let_it_through() -> None:
    # A pipeline applied before the rule, or by a process with other settings.
    config = DockerConfig.model_validate({"image": "busybox", "labels": {"dirigent.dev/run": "9"}})
    with pytest.raises(BlockFailure) as refused:
        await DockerRunOperator(KubeSettings()).execute(config, make_context())
    assert refused.value.code == "docker.config.refused"
    assert refused.value.message.startswith("config.labels.dirigent.dev/run:")
