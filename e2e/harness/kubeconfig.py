"""Kubeconfig files for the throwaway control plane.

Why: kubectl, the Python client, the controller-manager, the scheduler and kwok all take a
kubeconfig; writing them from one function keeps server URL, CA and credentials consistent.
Credential files are referenced by absolute path, so the kubeconfig stays valid as long as
the work dir exists.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from e2e.harness.certs import CertPair


def write_kubeconfig(
    path: Path,
    server: str,
    ca_file: Path,
    client: CertPair,
    user: str,
    cluster_name: str = "dirigent-e2e",
) -> Path:
    """Write a single-context kubeconfig authenticating with a client certificate."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster_name,
                "cluster": {"server": server, "certificate-authority": str(ca_file)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate": str(client.cert),
                    "client-key": str(client.key),
                },
            }
        ],
        "contexts": [
            {
                "name": cluster_name,
                "context": {"cluster": cluster_name, "user": user, "namespace": "default"},
            }
        ],
        "current-context": cluster_name,
        "preferences": {},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
    return path
