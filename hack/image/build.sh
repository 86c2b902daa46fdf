#!/usr/bin/env bash
# `make image`: builds the dirigent container image with podman, on a machine with no Docker
# engine and no registry. The base image is made from Debian packages with mmdebstrap (cached
# under ~/.cache/dirigent/image), unless BASE_IMAGE names one (e.g. an official Python 3.11
# image where a registry is reachable). Local quirks (runc instead of crun, default ulimits,
# the host's CA bundle for HTTPS inside the build) are handled here, never in the Dockerfile.
#
# Env: IMAGE (default localhost/dirigent:<version>), BASE_IMAGE, DIRIGENT_CACHE.
# Prints the image reference on stdout's last line; progress goes to stderr.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cache="${DIRIGENT_CACHE:-$HOME/.cache/dirigent}/image"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/cli/pyproject.toml" | head -1)"
image="${IMAGE:-localhost/dirigent:$version}"
# Not the real-node harness's localhost/dirigent/base:bookworm: the build stage needs
# python3-venv as well.
base_tag="localhost/dirigent/image-base:bookworm"
log() { printf '[image %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# shellcheck source=podman-env.sh
source "$repo/hack/image/podman-env.sh"

for tool in podman mmdebstrap; do
  command -v "$tool" >/dev/null || { log "$tool is missing: apt-get install -y podman buildah runc mmdebstrap skopeo"; exit 1; }
done

# One build at a time per machine (.ci/run builds in the background while an e2e test may ask
# for the same image): a second caller waits, then finds every layer cached.
mkdir -p "$cache"
exec 9>"$cache/.lock"
if ! flock -n 9; then
  log "another build holds $cache/.lock; waiting"
  flock 9
fi

if [[ -z "${BASE_IMAGE:-}" ]]; then
  BASE_IMAGE="$base_tag"
  if ! podman image exists "$base_tag"; then
    rootfs="$cache/image-base-bookworm.tar"
    if [[ ! -f "$rootfs" ]]; then
      # The host's own apt sources (no mirror named here); python3 and CA certificates only.
      sources="$(ls /etc/apt/sources.list.d/debian.sources 2>/dev/null || echo /etc/apt/sources.list)"
      mkdir -p "$cache"  # mmdebstrap refuses a target in a missing folder (a fresh machine)
      log "building the base root filesystem with mmdebstrap from $sources (about 90 s, once)"
      mmdebstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        bookworm "${rootfs%.tar}.partial.tar" "$sources" >&2
      mv -f "${rootfs%.tar}.partial.tar" "$rootfs"
    fi
    log "importing $rootfs as $base_tag"
    podman import --change 'CMD ["/bin/bash"]' "$rootfs" "$base_tag" >&2
  fi
fi

mounts=()
for f in /etc/ssl/certs/ca-certificates.crt /etc/pip.conf; do
  # Read-only bind mounts for this build only: they are not saved into the image.
  [[ -f "$f" ]] && mounts+=(-v "$f:$f:ro")
done

log "building $image on $BASE_IMAGE"
podman build --network host "${mounts[@]}" \
  --build-arg "BASE_IMAGE=$BASE_IMAGE" --build-arg "VERSION=$version" \
  -t "$image" -f "$repo/Dockerfile" "$repo" >&2
echo "$image"
