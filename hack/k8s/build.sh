#!/usr/bin/env bash
# Builds the e2e control plane's binaries (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok, helm) and the real node's kubelet and kube-proxy from the Go module
# proxy, because this machine has no Docker and no way to download release tarballs. Each
# tool is built in its own throwaway wrapper module so one tool's version selection can
# never break another's. The pod network's other programs: build-net.sh.
#
# Output: ${DIRIGENT_CACHE:-~/.cache/dirigent}/k8s/<versions-key>/bin
# A second run finds every binary and returns at once. Prints the bin dir on stdout's
# last line; progress goes to stderr.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
cache="${DIRIGENT_CACHE:-$HOME/.cache/dirigent}"
key="kube-${KUBE_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}_helm-${HELM_VERSION}"
root="$cache/k8s/$key"
bin="$root/bin"
work="$root/wrappers"

log() { printf '[k8s-build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

tools=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok helm kubelet kube-proxy)
missing=()
for t in "${tools[@]}"; do [[ -x "$bin/$t" ]] || missing+=("$t"); done
if [[ ${#missing[@]} -eq 0 ]]; then
  log "all binaries present in $bin"
  echo "$bin"
  exit 0
fi
mkdir -p "$root"
# One build at a time per versions key; a second caller waits, then finds the binaries.
exec 9>"$root/.lock"
if ! flock -n 9; then
  log "another build holds $root/.lock; waiting"
  flock 9
fi
missing=()
for t in "${tools[@]}"; do [[ -x "$bin/$t" ]] || missing+=("$t"); done
if [[ ${#missing[@]} -eq 0 ]]; then
  log "all binaries present in $bin"
  echo "$bin"
  exit 0
fi
log "building: ${missing[*]} -> $bin"

export GOMODCACHE="$cache/go/mod"
export GOCACHE="$cache/go/build"
export GOTOOLCHAIN=local
export GOFLAGS="-buildvcs=false -mod=mod"
export CGO_ENABLED=0
# GOPROXY: the Go client's own configured default (`go env GOPROXY`), never a host named here.
mkdir -p "$bin" "$work" "$GOMODCACHE" "$GOCACHE"
build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"

need() { for t in "$@"; do [[ -x "$bin/$t" ]] || return 0; done; return 1; }

# new_wrapper NAME: a fresh, empty module dir; prints its path.
new_wrapper() {
  local d="$work/$1"
  rm -rf "$d" && mkdir -p "$d"
  printf 'module dirigent.dev/k8s-build/%s\n\ngo 1.24\n' "$1" >"$d/go.mod"
  echo "$d"
}

# install_into BIN_NAME DIR: moves DIR/out/BIN_NAME into bin atomically.
install_into() { mv -f "$2/out/$1" "$bin/$1.tmp" && mv -f "$bin/$1.tmp" "$bin/$1"; }

# kube_wrapper NAME: a wrapper module requiring k8s.io/kubernetes at KUBE_VERSION, with every
# upstream `k8s.io/x => ./staging/...` replace turned into `k8s.io/x => k8s.io/x <staging tag>`
# and upstream's godebug line copied; prints its path.
kube_wrapper() {
  local v="$KUBE_VERSION" d gomod staging gd m
  local staging_v="v0.$(cut -d. -f2 <<<"$v").$(cut -d. -f3 <<<"$v")"
  d="$(new_wrapper "$1")"
  log "kubernetes $v: reading staging replaces from its go.mod"
  gomod="$(cd "$d" && "$GO" mod download -json "k8s.io/kubernetes@$v" \
    | sed -n 's/^[[:space:]]*"GoMod":[[:space:]]*"\([^"]*\)".*/\1/p')"
  [[ -f "$gomod" ]] || { log "could not locate k8s.io/kubernetes@$v go.mod"; return 1; }
  staging="$(sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\)[[:space:]]*=>[[:space:]]*\./staging/.*#\1#p' "$gomod")"
  [[ -n "$staging" ]] || { log "no staging replaces found in $gomod"; return 1; }
  local args=()
  for m in $staging; do args+=("-replace=$m=$m@$staging_v"); done
  (cd "$d" && "$GO" mod edit "${args[@]}")
  # Upstream's godebug defaults change runtime behaviour; keep them.
  gd="$(sed -n 's/^godebug[[:space:]]\+\(.*\)$/\1/p' "$gomod")"
  if [[ -n "$gd" ]]; then (cd "$d" && "$GO" mod edit "-godebug=$gd"); fi
  log "kubernetes $v: $(wc -w <<<"$staging") staging modules at $staging_v"
  echo "$d"
}

# kube_ldflags: the version stamps kubectl, Helm and kwok read (else v0.0.0-master).
kube_ldflags() {
  local v="$KUBE_VERSION" major minor ld="-s -w" p
  major="${v#v}"; major="${major%%.*}"
  minor="$(cut -d. -f2 <<<"$v")"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=$v -X $p.gitMajor=$major -X $p.gitMinor=$minor"
    ld+=" -X $p.gitTreeState=clean -X $p.gitCommit=module-proxy-$v -X $p.buildDate=$build_date"
  done
  echo "$ld"
}

# build_kube_cmds WRAPPER_NAME CMD...: builds k8s.io/kubernetes/cmd/<CMD> for each CMD.
build_kube_cmds() {
  local name="$1" v="$KUBE_VERSION" d c
  shift
  need "$@" || return 0
  d="$(kube_wrapper "$name")"
  local tools=() pkgs=()
  for c in "$@"; do tools+=("k8s.io/kubernetes/cmd/$c@$v"); pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  log "kubernetes $v: resolving modules for $*"
  (cd "$d" && "$GO" get -tool "${tools[@]}" >&2)
  log "kubernetes $v: compiling $* (slow)"
  mkdir -p "$d/out"
  (cd "$d" && "$GO" build -trimpath -ldflags "$(kube_ldflags)" -o out/ "${pkgs[@]}")
  for c in "$@"; do install_into "$c" "$d"; done
  log "kubernetes $v: $* done"
}

build_kube() {
  build_kube_cmds kube kube-apiserver kube-controller-manager kube-scheduler
}

# The real node's kubelet and kube-proxy (same source tree and version), in their own wrapper
# so a control plane already built is reused.
build_kubelet() {
  build_kube_cmds kubelet kubelet kube-proxy
}

build_etcd() {
  need etcd || return 0
  local d
  d="$(new_wrapper etcd)"
  # go.etcd.io/etcd/server/v3 carries replace directives, so it cannot be `go install`ed;
  # a wrapper main calling etcdmain.Main is the etcd binary.
  cat >"$d/main.go" <<'GO'
// Command etcd is upstream etcd's main, rebuilt from the module proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  log "etcd $ETCD_VERSION: resolving modules"
  (cd "$d" && "$GO" get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2 && "$GO" mod tidy >&2)
  log "etcd $ETCD_VERSION: compiling"
  mkdir -p "$d/out"
  (cd "$d" && "$GO" build -trimpath -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=module-proxy-$ETCD_VERSION" -o out/etcd .)
  install_into etcd "$d"
  log "etcd $ETCD_VERSION: done"
}

# build_tool NAME MODULE@VERSION PACKAGE LDFLAGS: a plain module with no replaces.
build_tool() {
  need "$1" || return 0
  local name="$1" modv="$2" pkg="$3" ld="$4" d
  d="$(new_wrapper "$name")"
  log "$name $modv: resolving modules"
  (cd "$d" && "$GO" get -tool "$pkg@${modv#*@}" >&2)
  log "$name $modv: compiling"
  mkdir -p "$d/out"
  (cd "$d" && "$GO" build -trimpath -ldflags "-s -w $ld" -o "out/$name" "$pkg")
  install_into "$name" "$d"
  log "$name $modv: done"
}

start=$SECONDS
build_etcd
build_tool kwok "sigs.k8s.io/kwok@$KWOK_VERSION" sigs.k8s.io/kwok/cmd/kwok \
  "-X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v} -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=$KUBE_VERSION"
build_tool helm "helm.sh/helm/v3@$HELM_VERSION" helm.sh/helm/v3/cmd/helm \
  "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
build_kube
build_kubelet
log "built in $((SECONDS - start))s into $bin"
for t in "${tools[@]}"; do [[ -x "$bin/$t" ]] || { log "missing $t after build"; exit 1; }; done
echo "$bin"
