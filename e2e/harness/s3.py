"""A real S3 server for tests and for ``make s3-up``: SeaweedFS's ``weed server -s3``.

Why SeaweedFS: an Apache-2.0 S3 implementation we can build from the Go module proxy
(hack/s3/build.sh, cached under ~/.cache/dirigent/seaweedfs/<version>), one process, no
Docker. MinIO's server is AGPL and not for us.

What runs: one ``weed server`` holding a master, a volume server, a filer and the S3 gateway.
Every listener (HTTP and gRPC, each port chosen free) binds 127.0.0.1; the data, the unix
sockets, the logs and the S3 identity file live in a fresh work dir removed on ``stop``;
``HOME`` and the working directory point there too, so no stray ``~/.seaweedfs`` or
``/etc/seaweedfs`` config is read. The master's anonymous usage report is switched off and
the environment is cleared (no ``SENTRY_DSN`` reaches it), so nothing leaves the machine.
One identity (a fresh random access key and secret per start) may do everything; the
bucket is created through the S3 API itself, which doubles as the readiness check.

``python -m e2e.harness.s3 up`` (``make -s s3-up``) prints ``export`` lines with the
standard ``AWS_*`` names and ``DIRIGENT_S3_BUCKET``; the server outlives the command and
``down`` stops it from the state file. Tests use ``S3Server`` as a context manager.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from e2e.harness import processes
from e2e.harness.processes import Process

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "hack" / "s3" / "build.sh"
STATE_DIR = Path(
    os.environ.get("DIRIGENT_S3_WORKDIR", Path.home() / ".cache" / "dirigent" / "s3-up")
)
STATE_FILE = "state.json"
REGION = "us-east-1"
DEFAULT_BUCKET = "dirigent"


def ensure_weed(env: dict[str, str] | None = None) -> Path:
    """The ``weed`` binary, built by hack/s3/build.sh on first use (progress on stderr).

    ``DIRIGENT_WEED`` names a ready-made binary and skips the script.
    """
    environ = dict(os.environ if env is None else env)
    override = environ.get("DIRIGENT_WEED")
    if override:
        path = Path(override)
    else:
        result = subprocess.run(
            ["bash", str(BUILD_SCRIPT)], stdout=subprocess.PIPE, text=True, env=environ, check=False
        )
        if result.returncode != 0:
            raise RuntimeError(f"{BUILD_SCRIPT} failed with exit code {result.returncode}")
        path = Path(result.stdout.strip().splitlines()[-1])
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"{path} is not an executable weed binary")
    return path


@dataclass(frozen=True)
class S3Endpoint:
    """Where the server answers and who may use it: what a client needs, nothing more."""

    url: str
    access_key: str
    secret_key: str
    region: str
    bucket: str

    def env(self) -> dict[str, str]:
        """The standard variables an S3 client reads, plus the bucket made for us."""
        return {
            "AWS_ENDPOINT_URL": self.url,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
            "DIRIGENT_S3_BUCKET": self.bucket,
        }


class S3Server:
    """One ``weed server -s3`` on loopback, in its own work dir; a context manager."""

    def __init__(
        self,
        weed: Path,
        workdir: Path | None = None,
        *,
        bucket: str = DEFAULT_BUCKET,
        tie_to_parent: bool = True,
    ) -> None:
        self.weed = weed
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="dirigent-s3-"))
        self.bucket = bucket
        self.tie_to_parent = tie_to_parent
        self.process: Process | None = None
        self.endpoint: S3Endpoint | None = None
        self.ready_after: float | None = None
        self.sockets: list[Path] = []

    def __enter__(self) -> S3Endpoint:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self, timeout: float = 90.0) -> S3Endpoint:
        """Start the server, wait until S3 answers, create the bucket; stop it on failure."""
        began = time.monotonic()
        try:
            endpoint = self._spawn()
            _wait_for_bucket(endpoint, self.process, timeout)
        except BaseException:
            self.stop()
            raise
        self.endpoint = endpoint
        self.ready_after = round(time.monotonic() - began, 1)
        self._write_state()
        return endpoint

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL) and remove its work dir."""
        if self.process is not None:
            self.process.stop(timeout=30)  # weed exits by itself ~15 s after SIGTERM
            self.process = None
        _remove_sockets(self.sockets)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _spawn(self) -> S3Endpoint:
        for sub in ("data", "meta", "tmp", "logs"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        endpoint = S3Endpoint(
            url="",
            access_key="DIRIGENT" + secrets.token_hex(6).upper(),
            secret_key=secrets.token_urlsafe(30),
            region=REGION,
            bucket=self.bucket,
        )
        config = self.workdir / "s3.json"
        config.write_text(json.dumps(_identities(endpoint)))
        config.chmod(0o600)
        argv, s3_port, grpc_ports = _server_argv(self.weed, self.workdir, config)
        self.sockets = _grpc_sockets(grpc_ports)
        endpoint = S3Endpoint(**{**asdict(endpoint), "url": f"http://127.0.0.1:{s3_port}"})
        self.process = _start_in(self.workdir, argv, tie_to_parent=self.tie_to_parent)
        self.endpoint = endpoint
        self._write_state()
        return endpoint

    def _write_state(self) -> None:
        state: dict[str, Any] = {
            "workdir": str(self.workdir),
            "process": self.process.to_state() if self.process else None,
            "endpoint": asdict(self.endpoint) if self.endpoint else None,
            "ready_after": self.ready_after,
            "sockets": [str(p) for p in self.sockets],
        }
        path = self.workdir / STATE_FILE
        path.write_text(json.dumps(state, indent=2))
        path.chmod(0o600)  # it holds the secret key


def _identities(endpoint: S3Endpoint) -> dict[str, Any]:
    # SeaweedFS's S3 identity file: one identity, every action, no anonymous access.
    return {
        "identities": [
            {
                "name": "dirigent",
                "credentials": [
                    {"accessKey": endpoint.access_key, "secretKey": endpoint.secret_key}
                ],
                "actions": ["Admin", "Read", "List", "Tagging", "Write"],
            }
        ]
    }


def _server_argv(weed: Path, workdir: Path, config: Path) -> tuple[list[str], int, dict[str, int]]:
    """``weed server`` with every listener on 127.0.0.1 and everything else switched off."""
    ports = {name: processes.free_port() for name in ("master", "volume", "filer", "s3")}
    grpc = {name: processes.free_port() for name in ports}
    argv = [
        str(weed),
        "-logtostderr",
        f"-config_dir={workdir}",
        "server",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-dir={workdir / 'data'}",
        f"-master.dir={workdir / 'meta'}",
        f"-master.port={ports['master']}",
        f"-master.port.grpc={grpc['master']}",
        "-master.telemetry=false",
        "-master.volumeSizeLimitMB=1024",
        "-volume.max=0",
        "-volume.preStopSeconds=0",
        f"-volume.port={ports['volume']}",
        f"-volume.port.grpc={grpc['volume']}",
        "-filer",
        f"-filer.port={ports['filer']}",
        f"-filer.port.grpc={grpc['filer']}",
        f"-filer.localSocket={workdir / 'tmp' / 'filer.sock'}",
        "-s3",
        f"-s3.port={ports['s3']}",
        f"-s3.port.grpc={grpc['s3']}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-s3.config={config}",
        f"-s3.localSocket={workdir / 'tmp' / 's3.sock'}",
    ]
    return argv, ports["s3"], grpc


def _grpc_sockets(grpc_ports: dict[str, int]) -> list[Path]:
    # weed serves each gRPC service on a unix socket too, at a path it fixes under /tmp and
    # does not always remove on exit; stop() removes exactly these.
    return [Path(f"/tmp/seaweedfs-{name}-grpc-{port}.sock") for name, port in grpc_ports.items()]


def _remove_sockets(paths: list[Path]) -> None:
    for path in paths:
        if path.is_socket():
            path.unlink(missing_ok=True)


def _start_in(workdir: Path, argv: list[str], *, tie_to_parent: bool) -> Process:
    # A clean environment: no SENTRY_DSN, no proxy settings, no AWS_* of the caller.
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(workdir),
        "TMPDIR": str(workdir / "tmp"),
        "LANG": "C.UTF-8",
    }
    # The work dir as cwd too: weed also reads toml config from its working directory.
    return processes.start(
        "weed", argv, workdir / "logs", tie_to_parent=tie_to_parent, env=env, cwd=workdir
    )


def _wait_for_bucket(endpoint: S3Endpoint, process: Process | None, timeout: float) -> None:
    """Create the bucket through the S3 API, retrying until the gateway and filer answer."""
    import botocore.config
    import botocore.exceptions
    import botocore.session

    client: Any = botocore.session.get_session().create_client(
        "s3",
        endpoint_url=endpoint.url,
        region_name=endpoint.region,
        aws_access_key_id=endpoint.access_key,
        aws_secret_access_key=endpoint.secret_key,
        config=botocore.config.Config(
            s3={"addressing_style": "path"},
            retries={"max_attempts": 1},
            connect_timeout=2,
            read_timeout=10,
        ),
    )
    last: list[str] = []

    def created() -> bool:
        try:
            client.create_bucket(Bucket=endpoint.bucket)
        except botocore.exceptions.ClientError as err:
            code = err.response.get("Error", {}).get("Code", "")
            if code in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                return True
            last[:] = [f"{code}: {err}"]
            return False
        except (botocore.exceptions.BotoCoreError, OSError) as err:
            last[:] = [str(err)]
            return False
        return True

    try:
        processes.wait_until(
            created,
            what=f"bucket {endpoint.bucket} at {endpoint.url}",
            timeout=timeout,
            process=process,
        )
    except TimeoutError as err:
        raise TimeoutError(f"{err}\nlast S3 answer: {last[0] if last else 'none'}") from None
    finally:
        client.close()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Endpoint]:
    """A real S3 server for the session, with a bucket; import this name into a conftest.

    The first use builds ``weed`` (minutes, once per machine); a conftest's
    ``pytest_collection_finish`` should call ``ensure_weed()`` so the build runs outside
    any test's timeout.
    """
    with S3Server(ensure_weed()) as endpoint:
        yield endpoint


def uses_s3(session: pytest.Session) -> bool:
    """Whether any collected test asks for the S3 server."""
    return any("s3_server" in getattr(item, "fixturenames", ()) for item in session.items)


def read_state(workdir: Path) -> dict[str, Any] | None:
    path = workdir / STATE_FILE
    if not path.exists():
        return None
    state: dict[str, Any] = json.loads(path.read_text())
    return state


def stop_from_state(state_dir: Path = STATE_DIR) -> bool:
    """Stop a server started by ``up`` in another process; True when one was running."""
    pointer = read_state(state_dir)
    if pointer is None:
        return False
    workdir = Path(pointer["workdir"])
    state = read_state(workdir) or pointer
    running = False
    if state.get("process"):
        proc = Process.from_state(state["process"])
        running = proc.running()
        proc.stop(timeout=30)
    _remove_sockets([Path(p) for p in state.get("sockets", [])])
    shutil.rmtree(workdir, ignore_errors=True)
    (state_dir / STATE_FILE).unlink(missing_ok=True)
    return running


def _up(state_dir: Path, bucket: str) -> int:
    if stop_from_state(state_dir):
        print("stopped the S3 server of an earlier `up`", file=sys.stderr)
    print("building or finding weed (hack/s3/build.sh) ...", file=sys.stderr)
    server = S3Server(ensure_weed(), bucket=bucket, tie_to_parent=False)
    endpoint = server.start()
    state_dir.mkdir(parents=True, exist_ok=True)
    pointer = state_dir / STATE_FILE
    pointer.write_text(json.dumps({"workdir": str(server.workdir)}))
    print(
        f"S3 ready after {server.ready_after}s at {endpoint.url}; logs in {server.workdir / 'logs'};"
        " stop with `make s3-down`",
        file=sys.stderr,
    )
    for name, value in endpoint.env().items():
        print(f"export {name}={value}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.harness.s3", description=__doc__)
    parser.add_argument("command", choices=["up", "down", "status"])
    parser.add_argument("--bucket", default=DEFAULT_BUCKET)
    parser.add_argument("--state-dir", type=Path, default=STATE_DIR)
    args = parser.parse_args(argv)
    state_dir: Path = args.state_dir.resolve()
    if args.command == "up":
        return _up(state_dir, args.bucket)
    if args.command == "down":
        stopped = stop_from_state(state_dir)
        print("stopped the S3 server" if stopped else "no S3 server was running", file=sys.stderr)
        return 0
    pointer = read_state(state_dir)
    state = read_state(Path(pointer["workdir"])) if pointer else None
    if state is None:
        print(f"no S3 server recorded in {state_dir}", file=sys.stderr)
        return 1
    endpoint = {**(state.get("endpoint") or {}), "secret_key": "(hidden)"}
    print(json.dumps({**state, "endpoint": endpoint}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
