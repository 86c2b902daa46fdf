"""A real Kubernetes control plane for e2e tests on machines without Docker.

Why: the operator, admission webhook and Job-running code must be proven against a real
apiserver, and this machine has no Docker for kind. The pieces, one job per module:

- ``binaries``: find (or build via hack/k8s/build.sh) the pinned upstream binaries.
- ``certs``: the PKI the apiserver and its clients need.
- ``kubeconfig``: kubeconfig files for the admin and each component.
- ``processes``: start, health-check and stop child processes.
- ``kwok``: kwok's stage configuration and fake nodes.
- ``controlplane``: etcd + apiserver + controller-manager + scheduler + kwok, wired together.
- ``cleanup``: remove what a killed dirigent operator leaves behind.
- ``clusters``: choose an existing cluster, kind, or the local control plane.
"""
