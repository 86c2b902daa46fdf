"""Pod networking for the real node: a bridge only this machine has, the reference CNI
plugins, and nftables rules that keep every packet on the machine.

Why: with host networking only, two replicas of a Deployment collide on their port and no
NetworkPolicy can be enforced. Here each pod gets its own address on the bridge
``dirigent0``; kube-proxy (``kubeproxy``) makes Services route and kube-network-policies
(``netpolicy``) enforces NetworkPolicies. What this module decides:

- the bridge is made here with the gateway address, not by the bridge plugin
  (``isGateway: false``), so forwarding and ``route_localnet`` are switched on for that one
  interface: the plugin's gateway mode would turn on the host-wide ``ip_forward``;
- the pod CIDR overlaps no address or route of the host and not the Service CIDR; the
  Service CIDR is routed to the bridge, so a cluster IP never leaves by the host's default
  route, even before kube-proxy has programmed it;
- no masquerading: pods talk to each other and to this host, nothing else. The table
  ``inet dirigent-real-node`` drops whatever would be forwarded between the bridge and
  another interface, and packets for pod addresses arriving elsewhere than the bridge;
- the API server and the embedded PostgreSQL listen on 127.0.0.1 only. Pods reach the API
  server at the ``kubernetes`` Service's address (its certificate names it; the API server
  publishes no endpoint for a loopback address) and the host ports ``expose_host_port``
  lists at the gateway: both are DNATed to 127.0.0.1, which ``route_localnet`` allows on
  the bridge alone, and SNATed to 127.0.0.1 so a server trusting loopback clients (the
  embedded PostgreSQL's ``trust``) sees one.

Undo: ``snapshot()`` records, before anything changes, the network sysctls, the nftables
tables and the network namespaces that exist; ``teardown(snapshot)`` removes the bridge,
the ports left on it, the tables in ``OWNED_TABLES`` and the pod network namespaces that
appeared since, and writes back every sysctl that changed. The snapshot lives in the
node's ``state.json``, so a crashed session is undone by the next start.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

BRIDGE = "dirigent0"
TABLE = "dirigent-real-node"
CNI_NETWORK = "dirigent-pods"
CANDIDATE_CIDRS = (
    "10.244.0.0/24",
    "10.245.0.0/24",
    "172.30.244.0/24",
    "192.168.244.0/24",
)
# containerd 1.6 pins each pod's network namespace here (not configurable before 1.7).
NETNS_DIR = Path("/run/netns")
NETNS_PREFIX = "cni-"
# Tables the node's programs create: ours, kube-proxy's (nftables mode), the policy agent's,
# portmap's and the bridge plugin's (if masquerading were ever turned on).
OWNED_TABLES = (
    ("inet", TABLE),
    ("ip", "kube-proxy"),
    ("ip6", "kube-proxy"),
    ("inet", "kube-network-policies"),
    ("ip", "cni_hostport"),
    ("ip6", "cni_hostport"),
    ("inet", "cni_plugins_masquerade"),
)
# Host-wide settings the node's network programs could change (kube-proxy's conntrack
# tuning, a plugin's forwarding): saved before the node starts, written back after.
NET_SETTINGS = (
    "net/ipv4/ip_forward",
    "net/ipv4/conf/all/forwarding",
    "net/ipv4/conf/all/route_localnet",
    "net/ipv6/conf/all/forwarding",
    "net/bridge/bridge-nf-call-iptables",
    "net/bridge/bridge-nf-call-ip6tables",
    "net/netfilter/nf_conntrack_max",
    "net/netfilter/nf_conntrack_tcp_timeout_established",
    "net/netfilter/nf_conntrack_tcp_timeout_close_wait",
    "net/netfilter/nf_conntrack_udp_timeout",
    "net/netfilter/nf_conntrack_udp_timeout_stream",
)
_SYSCTL = Path("/proc/sys")


@dataclass(frozen=True)
class PodNetwork:
    """The node's pod network: its CIDR, and what pods reach on the host's loopback."""

    cidr: str
    service_cidr: str
    service_ip: str  # the ``kubernetes`` Service's cluster IP
    api_port: int  # the API server's port on 127.0.0.1
    bridge: str = BRIDGE

    @property
    def gateway(self) -> str:
        """The bridge's address: the pods' default gateway and the host as they see it."""
        return str(next(ipaddress.ip_network(self.cidr).hosts()))

    def to_state(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> PodNetwork:
        return cls(**state)


def _run(*argv: str, stdin: str | None = None, check: bool = True) -> str:
    result = subprocess.run(
        list(argv), input=stdin, capture_output=True, text=True, timeout=60, check=False
    )
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {result.returncode}: {result.stderr.strip()}")
    return result.stdout


def host_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network the host has an address in or a route to (the default excepted)."""
    found = []
    for route in json.loads(_run("ip", "-j", "-4", "route", "show", "table", "all") or "[]"):
        dst = route.get("dst", "default")
        if dst != "default":
            found.append(ipaddress.IPv4Network(dst, strict=False))
    for link in json.loads(_run("ip", "-j", "-4", "addr") or "[]"):
        for addr in link.get("addr_info", []):
            found.append(
                ipaddress.IPv4Network(f"{addr['local']}/{addr['prefixlen']}", strict=False)
            )
    return found


def choose_cidr(service_cidr: str, taken: list[ipaddress.IPv4Network] | None = None) -> str:
    """The first candidate that overlaps none of the host's networks nor the Service CIDR."""
    busy = [*(host_networks() if taken is None else taken), ipaddress.IPv4Network(service_cidr)]
    for candidate in CANDIDATE_CIDRS:
        net = ipaddress.IPv4Network(candidate)
        if not any(net.overlaps(other) for other in busy):
            return candidate
    raise RuntimeError(
        f"every candidate pod CIDR ({', '.join(CANDIDATE_CIDRS)}) overlaps a network of this "
        "host; free one or add a candidate in e2e/harness/podnet.py"
    )


def read_settings() -> dict[str, str]:
    out = {}
    for key in NET_SETTINGS:
        with contextlib.suppress(OSError):
            out[key] = (_SYSCTL / key).read_text().strip()
    return out


def nft_tables() -> list[tuple[str, str]]:
    """(family, name) of every nftables table on the host."""
    data = json.loads(_run("nft", "-j", "list", "tables"))
    return [
        (item["table"]["family"], item["table"]["name"])
        for item in data.get("nftables", [])
        if "table" in item
    ]


def netns_names() -> list[str]:
    return sorted(p.name for p in NETNS_DIR.iterdir()) if NETNS_DIR.is_dir() else []


def snapshot() -> dict[str, Any]:
    """What exists before the node starts (JSON, kept in the node's state.json)."""
    if _link_exists(BRIDGE):
        raise RuntimeError(
            f"the interface {BRIDGE} exists but no real node recorded it; "
            f"remove it (ip link delete {BRIDGE}) if nothing else uses it"
        )
    return {
        "settings": read_settings(),
        "tables": [list(t) for t in nft_tables()],
        "netns": netns_names(),
        "netns_dir_existed": NETNS_DIR.is_dir(),
    }


def _link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def setup(net: PodNetwork) -> None:
    """The bridge with its gateway address, its sysctls, the Service route, the rules."""
    gateway = f"{net.gateway}/{ipaddress.ip_network(net.cidr).prefixlen}"
    _run("ip", "link", "add", net.bridge, "type", "bridge")
    _run("ip", "addr", "add", gateway, "dev", net.bridge)
    _run("ip", "link", "set", net.bridge, "up")
    for key in ("forwarding", "route_localnet"):
        (_SYSCTL / "net/ipv4/conf" / net.bridge / key).write_text("1")
    _run("ip", "route", "add", net.service_cidr, "dev", net.bridge, "src", net.gateway)
    _run("nft", "-f", "-", stdin=ruleset(net))


def ruleset(net: PodNetwork) -> str:
    """The ``inet dirigent-real-node`` table (see the module docstring)."""
    br, gw = net.bridge, net.gateway
    return f"""
table inet {TABLE} {{
  set host_ports {{ type inet_service; }}
  chain guard_forward {{
    type filter hook forward priority filter - 10; policy accept;
    iifname "{br}" oifname != "{br}" drop
    oifname "{br}" iifname != "{br}" drop
  }}
  chain guard_input {{
    type filter hook input priority filter - 10; policy accept;
    ip daddr {net.cidr} iifname != {{ "{br}", "lo" }} drop
    ip saddr {net.cidr} iifname != {{ "{br}", "lo" }} drop
  }}
  chain to_loopback {{
    type nat hook prerouting priority dstnat - 20; policy accept;
    iifname "{br}" ip daddr {net.service_ip} tcp dport 443 dnat ip to 127.0.0.1:{net.api_port}
    iifname "{br}" ip daddr {gw} tcp dport @host_ports dnat ip to 127.0.0.1
  }}
  chain loopback_source {{
    type nat hook input priority 100; policy accept;
    iifname "{br}" ip daddr 127.0.0.1 snat ip to 127.0.0.1
  }}
}}
"""


def expose_host_port(port: int) -> None:
    """Let pods reach ``127.0.0.1:port`` of the host at ``<gateway>:port``."""
    _run("nft", "add", "element", "inet", TABLE, "host_ports", f"{{ {port} }}")


def cni_conflist(net: PodNetwork, data_dir: Path) -> dict[str, Any]:
    """The CNI network: bridge + host-local addresses, portmap for hostPort (nftables)."""
    return {
        "cniVersion": "1.0.0",
        "name": CNI_NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": net.bridge,
                "isGateway": False,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(data_dir),
                    "ranges": [[{"subnet": net.cidr, "gateway": net.gateway}]],
                    "routes": [{"dst": "0.0.0.0/0", "gw": net.gateway}],
                },
            },
            {"type": "portmap", "backend": "nftables", "capabilities": {"portMappings": True}},
        ],
    }


def teardown(saved: dict[str, Any], bridge: str = BRIDGE) -> dict[str, Any]:
    """Undo what appeared since ``saved`` (``snapshot()``); every step runs regardless."""
    report: dict[str, Any] = {}
    report["netns_removed"] = _remove_new_netns(saved)
    ports = _bridge_ports(bridge)
    for port in ports:
        _run("ip", "link", "delete", port, check=False)
    if _link_exists(bridge):
        _run("ip", "link", "delete", bridge, check=False)
    report["links_removed"] = [*ports, bridge]
    before = {tuple(t) for t in saved.get("tables", [])}
    gone = []
    for family, name in OWNED_TABLES:
        if (family, name) not in before:
            out = subprocess.run(
                ["nft", "delete", "table", family, name], capture_output=True, check=False
            )
            if out.returncode == 0:
                gone.append(f"{family} {name}")
    report["tables_removed"] = gone
    report["settings_restored"] = restore_settings(saved.get("settings", {}))
    return report


def _bridge_ports(bridge: str) -> list[str]:
    if not _link_exists(bridge):
        return []
    links = json.loads(_run("ip", "-j", "link", "show", "master", bridge, check=False) or "[]")
    return [link["ifname"] for link in links]


def _remove_new_netns(saved: dict[str, Any]) -> list[str]:
    """Unmount and remove the pod network namespaces containerd pinned since the snapshot."""
    before = set(saved.get("netns", []))
    removed = []
    for name in netns_names():
        if name.startswith(NETNS_PREFIX) and name not in before:
            path = NETNS_DIR / name
            subprocess.run(["umount", str(path)], capture_output=True, check=False)
            with contextlib.suppress(OSError):
                path.unlink()
            removed.append(name)
    if not saved.get("netns_dir_existed", True) and NETNS_DIR.is_dir():
        with contextlib.suppress(OSError):
            NETNS_DIR.rmdir()
    return removed


def restore_settings(saved: dict[str, str]) -> dict[str, str]:
    """Write back every saved value that differs now; returns ``{key: "was -> restored"}``."""
    changed = {}
    for key, value in saved.items():
        path = _SYSCTL / key
        try:
            now = path.read_text().strip()
            if now != value:
                path.write_text(value)
                changed[key] = f"{now} -> {value}"
        except OSError:
            continue
    return changed


def leftovers(saved: dict[str, Any], bridge: str = BRIDGE) -> list[str]:
    """What a stopped node left of its network (empty when ``teardown`` undid everything)."""
    left = [f"interface {bridge}"] if _link_exists(bridge) else []
    before = {tuple(t) for t in saved.get("tables", [])}
    now = set(nft_tables())
    left += [f"nftables table {f} {n}" for f, n in OWNED_TABLES if (f, n) in now - before]
    new_ns = set(netns_names()) - set(saved.get("netns", []))
    left += [f"network namespace {n}" for n in sorted(new_ns) if n.startswith(NETNS_PREFIX)]
    current = read_settings()
    for key, value in saved.get("settings", {}).items():
        if current.get(key) != value:
            left.append(f"sysctl {key}: {current.get(key)} != {value}")
    return left
