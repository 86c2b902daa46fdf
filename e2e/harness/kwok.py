"""kwok's configuration: pod stages and fake nodes.

Why: there is no kubelet, so kwok plays every node and moves pods through their lifecycle
by "stages". A config holding any Pod stage replaces ALL of kwok's default Pod stages, so
this file ships copies of kwok v0.7's fast pod-ready / pod-complete / pod-delete next to our
own stage, and pod-complete skips pods that ask to fail.

Contract with tests: a pod annotated ``dirigent.dev/test-exit-code: "N"`` runs, then ends
``Failed`` with its containers terminated with exit code N. Any other pod owned by a Job
ends ``Succeeded`` with exit code 0. Node stages are kwok's defaults.
"""

from __future__ import annotations

from typing import Any

EXIT_CODE_ANNOTATION = "dirigent.dev/test-exit-code"
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"

_EXIT_CODE_KEY = f'.metadata.annotations["{EXIT_CODE_ANNOTATION}"]'

_POD_READY = r"""
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.podIP'
      operator: 'DoesNotExist'
  next:
    statusTemplate: |
      {{ $now := Now }}

      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Initialized
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Ready
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: ContainersReady
      {{ range .spec.readinessGates }}
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: {{ .conditionType | Quote }}
      {{ end }}

      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        restartCount: 0
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ end }}

      initContainerStatuses:
      {{ range .spec.initContainers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        restartCount: 0
        {{ if eq .restartPolicy "Always" }}
        started: true
        state:
          running:
            startedAt: {{ $now | Quote }}
        {{ else }}
        state:
          terminated:
            exitCode: 0
            finishedAt: {{ $now | Quote }}
            reason: Completed
            startedAt: {{ $now | Quote }}
        {{ end }}
      {{ end }}

      hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
      podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
      phase: Running
      startTime: {{ $now | Quote }}
"""

_POD_COMPLETE = r"""
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-complete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Running'
    - key: '.metadata.ownerReferences.[].kind'
      operator: 'In'
      values:
      - 'Job'
    - key: 'EXIT_CODE_KEY'
      operator: 'DoesNotExist'
  next:
    statusTemplate: |
      {{ $now := Now }}
      containerStatuses:
      {{ range $index, $item := .spec.containers }}
      - image: {{ $item.image | Quote }}
        name: {{ $item.name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: 0
            finishedAt: {{ $now | Quote }}
            reason: Completed
            startedAt: {{ $now | Quote }}
      {{ end }}
      phase: Succeeded
"""

# Our own stage: fail with the exit code the test asked for, Job-owned or not.
_POD_FAIL = r"""
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: dirigent-pod-fail-with-exit-code
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Running'
    - key: 'EXIT_CODE_KEY'
      operator: 'Exists'
  next:
    event:
      type: Warning
      reason: DirigentTestExitCode
      message: 'kwok failed the pod as asked by its EXIT_CODE_ANNOTATION annotation'
    statusTemplate: |
      {{ $now := Now }}
      {{ $code := index .metadata.annotations "EXIT_CODE_ANNOTATION" }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "False"
        reason: PodFailed
        type: Ready
      - lastTransitionTime: {{ $now | Quote }}
        status: "False"
        reason: PodFailed
        type: ContainersReady
      containerStatuses:
      {{ range $index, $item := .spec.containers }}
      - image: {{ $item.image | Quote }}
        name: {{ $item.name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: {{ $code }}
            finishedAt: {{ $now | Quote }}
            reason: Error
            startedAt: {{ $now | Quote }}
      {{ end }}
      phase: Failed
"""

_POD_DELETE = r"""
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
  next:
    finalizers:
      empty: true
    delete: true
"""


def stages_config() -> str:
    """The multi-document YAML passed to ``kwok --config``."""
    docs = [_POD_READY, _POD_COMPLETE, _POD_FAIL, _POD_DELETE]
    text = "---".join(docs)
    return text.replace("EXIT_CODE_KEY", _EXIT_CODE_KEY).replace(
        "EXIT_CODE_ANNOTATION", EXIT_CODE_ANNOTATION
    )


def fake_node(name: str) -> dict[str, Any]:
    """A Node that kwok manages (it matches kwok's --manage-nodes-with-annotation-selector).

    No taint: ordinary workloads (Jobs made by dirigent) must schedule here unchanged.
    """
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {FAKE_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
            },
        },
        "status": {
            "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
            "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
        },
    }
