#!/usr/bin/env bash
# Builds SeaweedFS's `weed` (the real S3 server of the test harness, e2e/harness/s3.py) from
# the Go module proxy, because this kind of machine has no Docker and no release downloads.
# Upstream's go.mod carries a replace directive, so `go install module@version` refuses it:
# a throwaway wrapper module requires it, copies its non-local replaces, and builds the
# `weed` package. Nothing of upstream's source is kept in this repository.
#
# Output: ${DIRIGENT_CACHE:-~/.cache/dirigent}/seaweedfs/<version>/bin/weed, with the build's
# GOMODCACHE and GOCACHE beside it. A second run finds the binary and returns at once.
# Prints the binary's path on stdout's last line; progress goes to stderr.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
cache="${DIRIGENT_CACHE:-$HOME/.cache/dirigent}"
root="$cache/seaweedfs/$SEAWEEDFS_VERSION"
bin="$root/bin"
module="github.com/seaweedfs/seaweedfs"

log() { printf '[s3-build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [[ -x "$bin/weed" ]]; then
  log "weed present in $bin"
  echo "$bin/weed"
  exit 0
fi
mkdir -p "$root"
# One build at a time per version; a second caller waits, then finds the binary.
exec 9>"$root/.lock"
if ! flock -n 9; then
  log "another build holds $root/.lock; waiting"
  flock 9
fi
if [[ -x "$bin/weed" ]]; then
  log "weed present in $bin"
  echo "$bin/weed"
  exit 0
fi

export GOMODCACHE="$root/go/mod"
export GOCACHE="$root/go/build"
export GOTOOLCHAIN=local
export GOFLAGS="-buildvcs=false -mod=mod"
export CGO_ENABLED=0
# GOPROXY: the Go client's own configured default (`go env GOPROXY`), never a host named here.
d="$root/wrapper"
rm -rf "$d" && mkdir -p "$d/out" "$bin" "$GOMODCACHE" "$GOCACHE"
printf 'module dirigent.dev/s3-build/weed\n\ngo 1.24\n' >"$d/go.mod"

start=$SECONDS
log "seaweedfs $SEAWEEDFS_VERSION: reading replace directives from its go.mod"
gomod="$(cd "$d" && "$GO" mod download -json "$module@$SEAWEEDFS_VERSION" \
  | sed -n 's/^[[:space:]]*"GoMod":[[:space:]]*"\([^"]*\)".*/\1/p')"
[[ -f "$gomod" ]] || { log "could not locate $module@$SEAWEEDFS_VERSION go.mod"; exit 1; }
# `replace a => b vX` lines (single-line form; a local `=> ./path` or commented line is
# skipped: the published module cannot use those either).
args=()
while read -r from to ver; do
  [[ -n "$ver" ]] && args+=("-replace=$from=$to@$ver")
done < <(sed -n 's#^replace[[:space:]]\+\([^[:space:]]\+\)[[:space:]]*=>[[:space:]]*\([^./[:space:]][^[:space:]]*\)[[:space:]]\+\(v[^[:space:]]\+\).*#\1 \2 \3#p' "$gomod")
if [[ ${#args[@]} -gt 0 ]]; then (cd "$d" && "$GO" mod edit "${args[@]}"); fi
log "seaweedfs: ${#args[@]} replace directive(s) copied"
gd="$(sed -n 's/^godebug[[:space:]]\+\(.*\)$/\1/p' "$gomod")"
if [[ -n "$gd" ]]; then (cd "$d" && "$GO" mod edit "-godebug=$gd"); fi

log "seaweedfs: resolving modules"
(cd "$d" && "$GO" get -tool "$module/weed@$SEAWEEDFS_VERSION" >&2)
log "seaweedfs: compiling weed (slow the first time)"
# Upstream's own release build: CGO off, no extra store tags.
(cd "$d" && "$GO" build -trimpath \
  -ldflags "-s -w -X $module/weed/util/version.COMMIT=module-proxy-$SEAWEEDFS_VERSION" \
  -o out/weed "$module/weed")
mv -f "$d/out/weed" "$bin/weed.tmp" && mv -f "$bin/weed.tmp" "$bin/weed"
log "seaweedfs: built in $((SECONDS - start))s into $bin"
echo "$bin/weed"
