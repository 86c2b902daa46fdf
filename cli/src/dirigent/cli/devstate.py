"""The state ``dirigent dev`` keeps between starts, under ``.dirigent/``.

What lives there, and nothing else is touched (``--wipe-state`` removes exactly these)::

    .dirigent/pgdata/       the embedded PostgreSQL cluster, migrated forward at each start
    .dirigent/artifacts/    artifact storage (file://)
    .dirigent/secrets/      webhook tokens minted for the folder's Webhooks, one file each
    .dirigent/secret.key    the key that seals connection secrets (unless DIRIGENT_SECRET_KEY)
    .dirigent/folders/      per folder served, which file put which manifest in force, so a
                            file removed while dev was stopped is deactivated at the next start

A profile file or anything else a person keeps in ``.dirigent/`` survives a wipe.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DevState"]

OWNED = ("pgdata", "artifacts", "secrets", "secret.key", "folders")


@dataclass(frozen=True)
class DevState:
    root: Path

    @property
    def pgdata(self) -> Path:
        return self.root / "pgdata"

    @property
    def artifacts(self) -> Path:
        return self.root / "artifacts"

    @property
    def secrets(self) -> Path:
        return self.root / "secrets"

    def applied_record(self, folder: Path) -> Path:
        """Where what ``folder`` put in force is kept (one file per folder, by its path)."""
        digest = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:16]
        return self.root / "folders" / f"{digest}.json"

    def wipe(self) -> list[str]:
        """Remove what dirigent created here; the names removed."""
        removed: list[str] = []
        for name in OWNED:
            path = self.root / name
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
            else:
                continue
            removed.append(name)
        return removed

    def secret_key(self) -> str:
        """The sealing key kept in ``secret.key`` (owner-only), made on first use."""
        path = self.root / "secret.key"
        if path.exists():
            return path.read_text(encoding="utf-8").strip()
        self.root.mkdir(parents=True, exist_ok=True)
        key = base64.b64encode(os.urandom(32)).decode()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IRUSR | stat.S_IWUSR)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(key + "\n")
        return key

    def webhook_token(self, namespace: str, name: str) -> tuple[str, bool]:
        """The token kept for a Webhook, minted when there is none; (token, minted)."""
        path = self.secrets / f"{namespace}.{name}-token"
        if path.exists():
            return path.read_text(encoding="utf-8").strip(), False
        self.secrets.mkdir(parents=True, exist_ok=True, mode=0o700)
        token = base64.urlsafe_b64encode(os.urandom(24)).decode().rstrip("=")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IRUSR | stat.S_IWUSR)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(token + "\n")
        return token, True
