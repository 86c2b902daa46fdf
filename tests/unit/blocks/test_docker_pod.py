"""A docker.run pod gets only what it needs, and its network is none unless the step asks.

The manifests the block sends: the pod's confinement, its default resources, the
installation's identity on every object and in the name, and the NetworkPolicy made beside
the Job.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from dirigent.blocks.kubernetes.docker import KubeSettings
from dirigent.blocks.kubernetes.jobs import (
    DockerConfig,
    is_ours,
    job_manifest,
    network_policy_for,
    secret_manifest,
)
from dirigent.blocks.kubernetes.settings import PodPolicy
from dirigent.blocks.kubernetes.tenancy import Placed
from tests.unit.sdk.fakes import make_context


def config(**fields: Any) -> DockerConfig:
    return DockerConfig.model_validate({"image": "busybox:1.36", **fields})


def pod_of(body: dict[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = body["spec"]["template"]["spec"]
    return pod


def test_the_pod_is_confined_by_default() -> None:
    pod = pod_of(job_manifest(config(), make_context(), "ns"))
    [container] = pod["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    assert "serviceAccountName" not in pod  # the namespace's default, with no token
    assert pod["enableServiceLinks"] is False  # no env vars naming every Service around
    # The root is read-only; /tmp is a size-limited emptyDir.
    assert container["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert pod["volumes"] == [{"name": "tmp", "emptyDir": {"sizeLimit": str(1 << 30)}}]


def test_the_installation_places_the_account_and_mounts_a_token_only_for_a_named_one() -> None:
    default = PodPolicy(placed=Placed("ns", "dirigent-job", mount_token=False))
    pod = pod_of(job_manifest(config(), make_context(), "ns", default))
    assert (pod["serviceAccountName"], pod["automountServiceAccountToken"]) == (
        "dirigent-job",
        False,
    )
    named = PodPolicy(placed=Placed("ns", "deployer", mount_token=True))
    pod = pod_of(job_manifest(config(serviceAccount="deployer"), make_context(), "ns", named))
    assert (pod["serviceAccountName"], pod["automountServiceAccountToken"]) == ("deployer", True)


def resources(policy: PodPolicy | None = None, **asked: dict[str, str]) -> dict[str, Any]:
    pod = pod_of(job_manifest(config(resources=asked), make_context(), "ns", policy))
    got: dict[str, Any] = pod["containers"][0]["resources"]
    return got


def test_every_resource_the_step_leaves_out_gets_the_installations_default() -> None:
    assert resources() == {
        "requests": {"cpu": "100m", "memory": "128Mi"},
        "limits": {"cpu": "1", "memory": "512Mi"},
    }
    assert resources(limits={"memory": "1Gi"}) == {
        "requests": {"cpu": "100m", "memory": "128Mi"},
        "limits": {"cpu": "1", "memory": "1Gi"},
    }


def test_a_default_that_would_contradict_the_step_gives_way() -> None:
    # A request above the default limit raises it; a limit below the default request lowers it.
    assert resources(requests={"cpu": "1000"})["limits"]["cpu"] == "1000"
    assert resources(limits={"memory": "64Mi"})["requests"]["memory"] == "64Mi"


def test_the_defaults_are_the_installations_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIRIGENT_KUBE_DEFAULT_REQUESTS", '{"cpu": "50m"}')
    monkeypatch.setenv("DIRIGENT_KUBE_DEFAULT_LIMITS", '{"memory": "256Mi"}')
    monkeypatch.setenv("DIRIGENT_KUBE_TMP_SIZE", "64mb")
    policy = KubeSettings().pod_policy()
    assert resources(policy) == {"requests": {"cpu": "50m"}, "limits": {"memory": "256Mi"}}
    pod = pod_of(job_manifest(config(), make_context(), "ns", policy))
    assert pod["volumes"][0]["emptyDir"] == {"sizeLimit": str(64 << 20)}


def test_the_installation_is_on_every_object_and_in_the_name() -> None:
    ctx = make_context(run_id=7, attempt_id=11)
    unnamed = job_manifest(config(), ctx, "ns")
    assert unnamed["metadata"]["name"] == "dirigent-7-11"
    assert unnamed["metadata"]["labels"]["dirigent.dev/installation"] == ""
    policy = KubeSettings(installation="prod.dirigent").pod_policy()
    named = job_manifest(config(), ctx, "ns", policy)
    name = named["metadata"]["name"]
    assert name.startswith("dirigent-") and name.endswith("-7-11") and name != "dirigent-7-11"
    for labels in (named["metadata"]["labels"], named["spec"]["template"]["metadata"]["labels"]):
        assert labels["dirigent.dev/installation"] == "prod.dirigent"
    secret = secret_manifest(
        config(connection="c", envFromConnection={"T": "t"}), ctx, "ns", {"t": "v"}, policy
    )
    assert secret is not None and secret["metadata"]["name"] == name
    assert secret["metadata"]["labels"]["dirigent.dev/installation"] == "prod.dirigent"
    netpol = network_policy_for(config(), ctx, "ns", policy)
    assert netpol is not None and netpol["metadata"]["name"] == name


def test_an_installation_name_must_be_a_label_value() -> None:
    with pytest.raises(ValidationError):
        KubeSettings(installation="not a label/value")


def test_only_this_attempts_job_of_this_installation_is_ours() -> None:
    ctx = make_context(attempt_id=11)
    policy = KubeSettings(installation="a").pod_policy()
    job = job_manifest(config(), ctx, "ns", policy)
    assert is_ours(job, ctx, "a")
    assert not is_ours(job, ctx, "b")  # another installation's Job of the same attempt id
    assert not is_ours(job, make_context(attempt_id=12), "a")
    before = {"metadata": {"labels": {"dirigent.dev/attempt": "11"}}}  # made before the label
    assert is_ours(before, ctx, "") and not is_ours(before, ctx, "a")


def test_no_network_by_default_a_policy_denying_everything_selects_the_jobs_pods() -> None:
    ctx = make_context(attempt_id=11)
    body = job_manifest(config(), ctx, "ns")
    policy = network_policy_for(config(), ctx, "ns")
    assert policy == {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": body["metadata"]["name"],
            "namespace": "ns",
            "labels": {
                k: v for k, v in body["metadata"]["labels"].items() if k != "dirigent.dev/network"
            },
        },
        "spec": {
            "podSelector": {
                "matchLabels": {"dirigent.dev/attempt": "11", "dirigent.dev/installation": ""}
            },
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": [],
        },
    }
    pod_labels = body["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert pod_labels["dirigent.dev/network"] == "none"


def test_a_list_of_destinations_allows_egress_to_those_only_and_says_so_on_the_job() -> None:
    asked = config(network=[{"cidr": "10.1.2.3", "ports": [443]}, {"cidr": "192.168.0.0/16"}])
    ctx = make_context()
    policy = network_policy_for(asked, ctx, "ns")
    assert policy is not None
    egress = policy["spec"]["egress"]
    assert egress[0] == {
        "to": [{"ipBlock": {"cidr": "10.1.2.3/32"}}],
        "ports": [{"protocol": "TCP", "port": 443}],
    }
    assert egress[1] == {"to": [{"ipBlock": {"cidr": "192.168.0.0/16"}}]}
    assert egress[2]["ports"] == [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
    assert policy["spec"]["ingress"] == []
    meta = job_manifest(asked, ctx, "ns")["spec"]["template"]["metadata"]
    assert meta["labels"]["dirigent.dev/network"] == "restricted"
    told = json.loads(meta["annotations"]["dirigent.dev/network-destinations"])
    assert told == [{"cidr": "10.1.2.3/32", "ports": [443]}, {"cidr": "192.168.0.0/16"}]


def test_network_true_gets_no_policy_of_ours_and_a_label_saying_so() -> None:
    asked = config(network=True)
    assert network_policy_for(asked, make_context(), "ns") is None
    labels = job_manifest(asked, make_context(), "ns")["metadata"]["labels"]
    assert labels["dirigent.dev/network"] == "open"


@pytest.mark.parametrize("cidr", ["api.example.com", "10.0.0.0/33", ""])
def test_a_destination_is_an_ip_network(cidr: str) -> None:
    with pytest.raises(ValidationError, match="not an IP network"):
        config(network=[{"cidr": cidr}])
