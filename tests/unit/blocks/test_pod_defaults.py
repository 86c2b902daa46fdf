"""The worker's pod defaults reach every docker.run Job, and never override the Job's own."""

from __future__ import annotations

from typing import Any

from dirigent.blocks.kubernetes.docker import KubeSettings
from dirigent.blocks.kubernetes.jobs import with_pod_defaults


def job(**pod_spec: Any) -> dict[str, Any]:
    return {"spec": {"template": {"spec": {"restartPolicy": "Never", **pod_spec}}}}


def test_defaults_fill_fields_the_job_leaves_unset() -> None:
    defaults = {"nodeSelector": {"pool": "batch"}, "hostNetwork": True}
    pod = with_pod_defaults(job(), defaults)["spec"]["template"]["spec"]
    assert pod == {"restartPolicy": "Never", "nodeSelector": {"pool": "batch"}, "hostNetwork": True}


def test_a_field_the_job_sets_is_kept() -> None:
    pod = with_pod_defaults(job(), {"restartPolicy": "Always"})["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"


def test_defaults_are_read_as_json_from_the_environment(monkeypatch: Any) -> None:
    monkeypatch.setenv("DIRIGENT_KUBE_POD_DEFAULTS", '{"tolerations": [{"key": "k"}]}')
    assert KubeSettings().pod_defaults == {"tolerations": [{"key": "k"}]}
    monkeypatch.delenv("DIRIGENT_KUBE_POD_DEFAULTS")
    assert KubeSettings().pod_defaults == {}
