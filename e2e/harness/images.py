"""The real node's images, made without a registry: the pause image and the base image.

Why: this machine pulls from no container registry, so every image a real-node pod uses is
built here and imported into containerd (pods use ``imagePullPolicy: Never``):

- the pause image: Debian's static ``catatonit`` alone in a scratch image, run as
  ``catatonit -P`` (it only holds the pod's namespaces open);
- ``localhost/dirigent/base:bookworm``: a minimal Debian bookworm with python3, made by
  mmdebstrap from the host's own apt sources and turned into an image by ``podman import``.

Each image is saved as a docker-archive under ``~/.cache/dirigent/images/``, its file name
keyed by a hash of what went into it, so a warm start only imports a file. Podman keeps its
configuration and store under ``~/.cache/dirigent/podman/`` (runc, cgroupfs, file events,
rlimits this kernel allows), never in the host's default store.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

PAUSE_IMAGE = "localhost/dirigent/pause:catatonit"
BASE_IMAGE = "localhost/dirigent/base:bookworm"
BASE_PACKAGES = ("python3", "ca-certificates")
CATATONIT = Path("/usr/bin/catatonit")
_ENV = (
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG=C.UTF-8",
    "PYTHONUNBUFFERED=1",
)


def cache_root() -> Path:
    """``$DIRIGENT_CACHE`` or ``~/.cache/dirigent`` (the same root hack/k8s/build.sh uses)."""
    return Path(os.environ.get("DIRIGENT_CACHE", Path.home() / ".cache" / "dirigent"))


@dataclass(frozen=True)
class ImageArchive:
    """A docker-archive on disk holding one tagged image."""

    name: str
    path: Path


def podman_env(root: Path | None = None) -> dict[str, str]:
    """Environment for podman with its configuration and store under the cache."""
    base = (root or cache_root()) / "podman"
    base.mkdir(parents=True, exist_ok=True)
    conf = base / "containers.conf"
    conf.write_text(
        "[engine]\n"
        'runtime = "runc"\n'
        'cgroup_manager = "cgroupfs"\n'
        'events_logger = "file"\n'
        "[containers]\n"
        'default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]\n'
    )
    storage = base / "storage.conf"
    storage.write_text(
        "[storage]\n"
        'driver = "overlay"\n'
        f'graphroot = "{base / "storage"}"\n'
        f'runroot = "{base / "run"}"\n'
    )
    return {**os.environ, "CONTAINERS_CONF": str(conf), "CONTAINERS_STORAGE_CONF": str(storage)}


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:16]


def _apt_sources() -> list[str]:
    """The host's apt source files, handed to mmdebstrap as its mirrors."""
    d = Path("/etc/apt/sources.list.d")
    files = sorted(p for p in d.glob("*") if p.suffix in (".sources", ".list"))
    main = Path("/etc/apt/sources.list")
    if main.is_file() and any(
        line.strip() and not line.lstrip().startswith("#") for line in main.read_text().splitlines()
    ):
        files.insert(0, main)
    if not files:
        raise RuntimeError("no apt sources on this host for mmdebstrap to use")
    return [str(p) for p in files]


def _apt_options() -> list[str]:
    """Host apt.conf snippets about fetching (e.g. validity checks of a snapshot mirror)."""
    d = Path("/etc/apt/apt.conf.d")
    return [
        f"--aptopt={p}"
        for p in sorted(d.glob("*"))
        if p.is_file() and "Acquire::" in p.read_text(errors="replace")
    ]


def _run(argv: list[str], env: dict[str, str] | None = None) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv[:3])} ... exited {result.returncode}:\n{result.stderr[-3000:]}"
        )


def _import_and_save(rootfs: Path, name: str, changes: list[str], out: Path) -> None:
    """``podman import`` a root filesystem tar as ``name``, then save it as a docker-archive."""
    env = podman_env()
    argv = ["podman", "import"]
    for change in changes:
        argv += ["--change", change]
    _run([*argv, str(rootfs), name], env)
    tmp = out.with_suffix(".partial")
    tmp.unlink(missing_ok=True)
    _run(["podman", "save", "--format", "docker-archive", "-o", str(tmp), name], env)
    _run(["podman", "rmi", "--force", name], env)
    tmp.replace(out)


def _env_changes() -> list[str]:
    return [f"ENV {e.replace('=', ' ', 1)}" for e in _ENV]


def pause_archive() -> ImageArchive:
    """The pause image (catatonit in a scratch image), built once per catatonit binary."""
    binary = CATATONIT.read_bytes()
    out = cache_root() / "images" / f"pause-catatonit-{_digest(binary, PAUSE_IMAGE.encode())}.tar"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        rootfs = out.with_suffix(".rootfs.tar")
        with tarfile.open(rootfs, "w") as tar:
            info = tarfile.TarInfo("catatonit")
            info.size, info.mode, info.mtime = len(binary), 0o755, 0
            tar.addfile(info, io.BytesIO(binary))
        changes = ['ENTRYPOINT ["/catatonit", "-P"]']
        _import_and_save(rootfs, PAUSE_IMAGE, changes, out)
        rootfs.unlink()
    return ImageArchive(PAUSE_IMAGE, out)


def static_binary_archive(name: str, binary: Path, entrypoint: list[str]) -> ImageArchive:
    """``name``: a scratch image holding only ``binary`` (static) at ``entrypoint[0]``,
    built once per binary (its digest keys the archive)."""
    data = binary.read_bytes()
    stem = name.rsplit("/", 1)[-1].replace(":", "-")
    out = cache_root() / "images" / f"{stem}-{_digest(data, name.encode())}.tar"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        rootfs = out.with_suffix(".rootfs.tar")
        with tarfile.open(rootfs, "w") as tar:
            info = tarfile.TarInfo(entrypoint[0].lstrip("/"))
            info.size, info.mode, info.mtime = len(data), 0o755, 0
            tar.addfile(info, io.BytesIO(data))
        _import_and_save(rootfs, name, [f"ENTRYPOINT {json.dumps(entrypoint)}"], out)
        rootfs.unlink()
    return ImageArchive(name, out)


def base_archive() -> ImageArchive:
    """``localhost/dirigent/base:bookworm`` (python3), built once per package set and sources."""
    sources = _apt_sources()
    key = _digest(
        BASE_IMAGE.encode(),
        ",".join(BASE_PACKAGES).encode(),
        "\n".join(_ENV).encode(),
        *(Path(s).read_bytes() for s in sources),
    )
    out = cache_root() / "images" / f"base-bookworm-{key}.tar"
    if out.exists():
        return ImageArchive(BASE_IMAGE, out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rootfs = out.with_suffix(".rootfs.tar")
    began = time.monotonic()
    _run(
        [
            "mmdebstrap",
            "--quiet",
            "--variant=minbase",
            f"--include={','.join(BASE_PACKAGES)}",
            *_apt_options(),
            "bookworm",
            str(rootfs),
            *sources,
        ]
    )
    _import_and_save(rootfs, BASE_IMAGE, [*_env_changes(), 'CMD ["python3"]'], out)
    rootfs.unlink()
    (out.parent / f"{out.stem}.seconds").write_text(f"{time.monotonic() - began:.1f}\n")
    return ImageArchive(BASE_IMAGE, out)


def node_images() -> list[ImageArchive]:
    """Every image the real node imports into containerd, built if not cached."""
    return [pause_archive(), base_archive()]
