# Sourced by hack/image/*.sh and read by the image tests: podman configuration kept under
# the cache folder, so this machine's quirks never reach the Dockerfile or the host's
# global configuration. runc (crun fails on this kernel's hybrid cgroups), cgroupfs, file
# events, and default ulimits the sandbox can grant. The same folder and settings as the
# real-node harness (e2e/harness/images.py), so `make image` lands in the store it imports
# images from.
_podman_cache="${DIRIGENT_CACHE:-$HOME/.cache/dirigent}/podman"
mkdir -p "$_podman_cache/storage" "$_podman_cache/run"
cat >"$_podman_cache/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
cat >"$_podman_cache/storage.conf" <<CONF
[storage]
driver = "overlay"
graphroot = "$_podman_cache/storage"
runroot = "$_podman_cache/run"
CONF
export CONTAINERS_CONF="$_podman_cache/containers.conf"
export CONTAINERS_STORAGE_CONF="$_podman_cache/storage.conf"
