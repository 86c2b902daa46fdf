"""A docker.run pod's network: none unless the step asks, as the design says.

Why per Job: the default (``network: false``) must hold for every Job whatever the
namespace's own policies say, so the block creates a NetworkPolicy beside each Job, named
like it and owned by it (the garbage collector deletes it with the Job). It selects the
Job's pods by the attempt and installation labels, which a step cannot set, and denies all
ingress and egress. ``network: [destinations]`` gets a policy that allows egress to those
CIDRs (and ports) only, plus DNS to ``kube-system``; ``network: true`` gets no policy of
ours (the namespace's policies, if any, apply). Whatever was asked is written on the Job
and its pods as the label ``dirigent.dev/network`` (``none`` / ``restricted`` / ``open``)
and, for a list, the annotation ``dirigent.dev/network-destinations`` (JSON), so an
installation's own NetworkPolicy can select them too.

The policy is created before the Job (a pod never starts without it) and made the Job's
once the Job exists, like the Secret for ``envFromConnection``. Enforcement is the CNI's:
a cluster without a NetworkPolicy enforcer stores the policy and enforces nothing.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any, Literal

from pydantic import Field, field_validator

from dirigent.blocks.base import Config

__all__ = ["Destination", "Network", "network_label", "network_metadata", "network_policy"]

NETWORK_LABEL = "dirigent.dev/network"
DESTINATIONS_ANNOTATION = "dirigent.dev/network-destinations"
DNS_NAMESPACE = "kube-system"


class Destination(Config):
    """Where a pod may connect: a CIDR (an address is a /32 or /128), optionally some ports."""

    cidr: str = Field(description="e.g. 10.0.0.0/8 or 203.0.113.7")
    ports: list[int] = Field(default_factory=list, description="TCP ports; empty: every port.")
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"

    @field_validator("cidr")
    @classmethod
    def _a_network(cls, value: str) -> str:
        try:
            return str(ipaddress.ip_network(value, strict=False))
        except ValueError:
            raise ValueError(
                f"'{value}' is not an IP network (a NetworkPolicy cannot name hosts)"
            ) from None

    @field_validator("ports")
    @classmethod
    def _ports(cls, value: list[int]) -> list[int]:
        if any(not 1 <= p <= 65535 for p in value):
            raise ValueError("ports are 1-65535")
        return value


Network = bool | list[Destination]


def network_label(network: Network) -> str:
    if network is True:
        return "open"
    return "restricted" if network else "none"


def network_metadata(network: Network) -> tuple[dict[str, str], dict[str, str]]:
    """The label and annotations that say what the step asked, for policies to select."""
    annotations = {}
    if isinstance(network, list) and network:
        dumped = [d.model_dump(exclude_defaults=True) for d in network]
        annotations[DESTINATIONS_ANNOTATION] = json.dumps(dumped, separators=(",", ":"))
    return {NETWORK_LABEL: network_label(network)}, annotations


def _egress(destinations: list[Destination]) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = []
    for d in destinations:
        rule: dict[str, Any] = {"to": [{"ipBlock": {"cidr": d.cidr}}]}
        if d.ports:
            rule["ports"] = [{"protocol": d.protocol, "port": p} for p in d.ports]
        rules.append(rule)
    dns_peer = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": DNS_NAMESPACE}}
    }
    dns_ports = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
    rules.append({"to": [dns_peer], "ports": dns_ports})
    return rules


def network_policy(
    network: Network,
    *,
    name: str,
    namespace: str,
    labels: dict[str, str],
    selector: dict[str, str],
) -> dict[str, Any] | None:
    """The NetworkPolicy for one Job's pods; None when the step asked for the network."""
    if network is True:
        return None
    spec: dict[str, Any] = {
        "podSelector": {"matchLabels": dict(selector)},
        # No ingress rules: nothing may connect to the pod. Egress: nothing, or the list.
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [],
        "egress": _egress(network) if isinstance(network, list) and network else [],
    }
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": spec,
    }
