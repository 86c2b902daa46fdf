#!/usr/bin/env bash
# Builds the real node's pod network programs from the Go module proxy (no release tarballs
# or images can be downloaded here):
#   cni                    the reference CNI plugins bridge, host-local, loopback, portmap
#                          (github.com/containernetworking/plugins)
#   kube-network-policies  the NetworkPolicy agent kind uses (sigs.k8s.io/kube-network-policies)
# kube-proxy is not here: it comes from hack/k8s/build.sh, from the same Kubernetes source
# tree and version as the kubelet.
#
# Usage: build-net.sh cni|kube-network-policies
# Output: ${DIRIGENT_CACHE:-~/.cache/dirigent}/<tool>/<version>/bin; the bin dir is printed
# on stdout's last line, progress goes to stderr. A second run returns at once.
#
# Each program is built inside a copy of its own module (its go.mod and go.sum, so exactly
# the dependency versions its authors tested), never merged with another tool's.
#
# kube-network-policies sends the first packet of each connection to user space with an
# nftables `queue` verdict. A kernel built without nft_queue (CONFIG_NFT_QUEUE unset, as on
# this sandbox: "Could not process rule: No such file or directory") cannot load that rule,
# and the agent then enforces nothing. Such kernels usually still have the xtables NFQUEUE
# target, which nftables reaches through nft_compat (iptables-nft uses the same path). On
# those, the build rewrites the agent's three queue verdicts into that target (same queue
# number, same bypass flag) and caches it under <version>+xt-nfqueue; on a kernel with
# nft_queue the upstream source is built unchanged. KNP_NFQUEUE=nft|xt overrides the probe.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
cache="${DIRIGENT_CACHE:-$HOME/.cache/dirigent}"

log() { printf '[net-build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "$*"; exit 1; }

export GOMODCACHE="$cache/go/mod"
export GOCACHE="$cache/go/build"
export GOTOOLCHAIN=local
export GOFLAGS="-buildvcs=false -mod=readonly"
export CGO_ENABLED=0
# GOPROXY: the Go client's own configured default (`go env GOPROXY`), never a host named here.
mkdir -p "$GOMODCACHE" "$GOCACHE"

# source_copy MODULE VERSION DEST: a writable copy of MODULE@VERSION from the module cache.
source_copy() {
  local dir empty
  empty="$(mktemp -d)"  # outside any module
  dir="$(cd "$empty" && "$GO" mod download -json "$1@$2" \
    | sed -n 's/^[[:space:]]*"Dir":[[:space:]]*"\([^"]*\)".*/\1/p')"
  rmdir "$empty"
  [[ -d "$dir" ]] || die "could not download $1@$2"
  rm -rf "$3" && mkdir -p "$(dirname "$3")"
  cp -r "$dir" "$3" && chmod -R u+w "$3"
}

# have_all ROOT NAME...: every NAME is an executable in ROOT/bin. Builders check it, take
# ROOT/.lock (a second caller waits for the first build instead of starting another) and
# check again.
have_all() {
  local root="$1" t
  shift
  for t in "$@"; do [[ -x "$root/bin/$t" ]] || return 1; done
}

build_cni() {
  local v="$CNI_PLUGINS_VERSION" root="$cache/cni-plugins/$CNI_PLUGINS_VERSION"
  local plugins=(bridge host-local loopback portmap)
  local pkgs=(plugins/main/bridge plugins/ipam/host-local plugins/main/loopback plugins/meta/portmap)
  if ! have_all "$root" "${plugins[@]}"; then
    mkdir -p "$root" && exec 9>"$root/.lock" && flock 9
    if ! have_all "$root" "${plugins[@]}"; then
      local began=$SECONDS src="$root/src" i
      log "cni plugins $v: fetching github.com/containernetworking/plugins"
      source_copy github.com/containernetworking/plugins "$v" "$src"
      log "cni plugins $v: compiling ${plugins[*]}"
      mkdir -p "$src/out" "$root/bin"
      for i in "${!plugins[@]}"; do
        (cd "$src" && "$GO" build -trimpath -o "out/${plugins[$i]}" -ldflags "-s -w \
          -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$v" \
          "./${pkgs[$i]}")
        mv -f "$src/out/${plugins[$i]}" "$root/bin/${plugins[$i]}"
      done
      rm -rf "$src"
      log "cni plugins $v: built in $((SECONDS - began))s"
    fi
  fi
  echo "$root/bin"
}

# nft_queue_works: can this kernel load an nftables `queue` verdict? Probed in a private
# network namespace, so the host's ruleset is never touched.
nft_queue_works() {
  command -v nft >/dev/null 2>&1 && command -v unshare >/dev/null 2>&1 || return 1
  unshare -n nft -f - >/dev/null 2>&1 <<'NFT'
table inet probe { chain c { type filter hook forward priority 0; queue num 1 bypass; } }
NFT
}

knp_variant() {
  case "${KNP_NFQUEUE:-}" in
    nft | xt) echo "$KNP_NFQUEUE" ;;
    "") if nft_queue_works; then echo nft; else echo xt; fi ;;
    *) die "KNP_NFQUEUE must be nft or xt, not ${KNP_NFQUEUE}" ;;
  esac
}

# The xtables NFQUEUE target in place of nftables' queue verdict (see the header).
knp_rewrite_queue() {
  local pkg="$1/pkg/networkpolicy"
  perl -0pi -e 's/queue := &expr\.Queue\{Num: uint16\(c\.config\.QueueID\)\}\n\tif c\.config\.FailOpen \{\n\t\tqueue\.Flag = expr\.QueueFlagBypass\n\t\}/queue := xtNFQueue(uint16(c.config.QueueID), c.config.FailOpen)/g' \
    "$pkg/controller.go"
  perl -pi -e 's/&expr\.Queue\{Num: uint16\(n\.nfQueueID\), Flag: expr\.QueueFlagBypass\}/xtNFQueue(uint16(n.nfQueueID), true)/g' \
    "$pkg/dnsagent.go"
  [[ "$(grep -c 'xtNFQueue(' "$pkg/controller.go" "$pkg/dnsagent.go" | awk -F: '{s+=$2} END {print s}')" == 3 ]] \
    || die "kube-network-policies $KUBE_NETWORK_POLICIES_VERSION: the queue verdicts are not where expected; update knp_rewrite_queue"
  if grep -n 'expr\.Queue' "$pkg"/*.go | grep -v '_test\.go'; then
    die "kube-network-policies: a queue verdict was left unrewritten"
  fi
  cat >"$pkg/zz_dirigent_xt_nfqueue.go" <<'GO'
package networkpolicy

// Added by dirigent's hack/k8s/build-net.sh for kernels without nft_queue.

import (
	"encoding/binary"

	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
)

// xtNFQueue queues to user space through the xtables NFQUEUE target (revision 3) via
// nft_compat: struct xt_NFQ_info_v3 {u16 queuenum; u16 queues_total; u16 flags}, padded
// to 8 bytes; flag 1 is NFQ_FLAG_BYPASS (accept when nobody listens on the queue).
func xtNFQueue(num uint16, bypass bool) expr.Any {
	info := make([]byte, 8)
	binary.NativeEndian.PutUint16(info[0:2], num)
	binary.NativeEndian.PutUint16(info[2:4], 1)
	if bypass {
		binary.NativeEndian.PutUint16(info[4:6], 1)
	}
	raw := xt.Unknown(info)
	return &expr.Target{Name: "NFQUEUE", Rev: 3, Info: &raw}
}
GO
}

build_knp() {
  local v="$KUBE_NETWORK_POLICIES_VERSION" variant key root
  variant="$(knp_variant)"
  key="$v"
  [[ "$variant" == xt ]] && key="$v+xt-nfqueue"
  root="$cache/kube-network-policies/$key"
  if ! have_all "$root" kube-network-policies; then
    mkdir -p "$root" && exec 9>"$root/.lock" && flock 9
    if ! have_all "$root" kube-network-policies; then
      local began=$SECONDS src="$root/src"
      log "kube-network-policies $v ($variant queue verdict): fetching"
      source_copy sigs.k8s.io/kube-network-policies "$v" "$src"
      [[ "$variant" == xt ]] && knp_rewrite_queue "$src"
      log "kube-network-policies $key: compiling"
      mkdir -p "$root/bin"
      (cd "$src" && "$GO" build -trimpath -ldflags "-s -w" -o "$root/bin/kube-network-policies.tmp" ./cmd)
      mv -f "$root/bin/kube-network-policies.tmp" "$root/bin/kube-network-policies"
      rm -rf "$src"
      log "kube-network-policies $key: built in $((SECONDS - began))s"
    fi
  fi
  echo "$root/bin"
}

case "${1:-}" in
  cni) build_cni ;;
  kube-network-policies) build_knp ;;
  *) die "usage: $0 cni|kube-network-policies" ;;
esac
