"""Which server the CLI talks to, and with which token: flags, then environment, then a profile.

Three planes stay apart: a *profile* (beside the person) holds a server URL and how to get a
token; *server settings* (``DIRIGENT_DATABASE_URL``, the secret key) live on the hosts that
run dirigent; *connections* live sealed in the database. A profile therefore never holds a
database URL, and one that names a database is refused on sight: a CLI that could reach the
database would bypass authentication, attribution and validation.

Profiles are read from ``.dirigent/profiles.yaml`` in the working folder, then
``~/.config/dirigent/profiles.yaml``::

    default: dev                 # used when neither --profile nor DIRIGENT_PROFILE is given
    profiles:
      dev: {url: http://127.0.0.1:8080, token_env: DIRIGENT_DEV_TOKEN}
      prod: {url: https://dirigent.example.com, token_cmd: "kubectl create token ci"}

A token is inline (``token``), read from a variable (``token_env``) or printed by a command
(``token_cmd``).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["ProfileError", "Target", "profile_paths", "resolve_target"]

_DATABASE_SCHEMES = ("postgres", "postgresql", "sqlite", "mysql")
_FIELDS = {"url", "token", "token_env", "token_cmd", "namespace"}


class ProfileError(ValueError):
    """A profile that cannot be used; the message says which and why."""


@dataclass(frozen=True)
class Target:
    url: str
    token: str | None
    namespace: str = "default"


def profile_paths(cwd: Path | None = None) -> list[Path]:
    here = (cwd or Path.cwd()) / ".dirigent" / "profiles.yaml"
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return [here, config / "dirigent" / "profiles.yaml"]


def _load(paths: list[Path]) -> tuple[Path, dict[str, Any]] | None:
    for path in paths:
        if path.is_file():
            try:
                data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            except yaml.YAMLError as err:
                raise ProfileError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
            if not isinstance(data, dict):
                raise ProfileError(f"{path}: expected a mapping with 'profiles'")
            return path, data
    return None


def _check(path: Path, name: str, profile: Any) -> dict[str, Any]:
    if not isinstance(profile, dict):
        raise ProfileError(f"{path}: profile {name!r} is not a mapping")
    for key, value in profile.items():
        if "database" in str(key).lower() or (
            isinstance(value, str) and value.lower().startswith(_DATABASE_SCHEMES)
        ):
            raise ProfileError(
                f"{path}: profile {name!r} names a database ({key}); a profile holds a server "
                "URL and a token, never a database URL — the CLI talks to the API only"
            )
    unknown = set(profile) - _FIELDS
    if unknown:
        raise ProfileError(
            f"{path}: profile {name!r} has unknown field(s) {', '.join(sorted(unknown))}; "
            f"known: {', '.join(sorted(_FIELDS))}"
        )
    return profile


def _token(path: Path, name: str, profile: dict[str, Any]) -> str | None:
    if profile.get("token"):
        return str(profile["token"])
    if profile.get("token_env"):
        return os.environ.get(str(profile["token_env"]))
    if profile.get("token_cmd"):
        done = subprocess.run(
            shlex.split(str(profile["token_cmd"])), capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise ProfileError(
                f"{path}: token_cmd of profile {name!r} failed ({done.returncode}): "
                f"{done.stderr.strip().splitlines()[-1] if done.stderr.strip() else 'no output'}"
            )
        return done.stdout.strip()
    return None


def resolve_target(
    url: str | None = None,
    token: str | None = None,
    profile: str | None = None,
    namespace: str | None = None,
    paths: list[Path] | None = None,
) -> Target:
    """Flags, then ``DIRIGENT_URL`` / ``DIRIGENT_TOKEN``, then the selected profile."""
    url = url or os.environ.get("DIRIGENT_URL")
    token = token or os.environ.get("DIRIGENT_TOKEN")
    found = _load(paths if paths is not None else profile_paths())
    chosen: dict[str, Any] = {}
    if found is not None:
        path, data = found
        profiles = data.get("profiles") or {}
        name = profile or os.environ.get("DIRIGENT_PROFILE") or data.get("default")
        if name is not None:
            if name not in profiles:
                have = ", ".join(sorted(profiles)) or "none"
                raise ProfileError(f"{path}: no profile {name!r} (it has: {have})")
            chosen = _check(path, str(name), profiles[name])
            url = url or chosen.get("url")
            token = token or _token(path, str(name), chosen)
    elif profile is not None:
        raise ProfileError(f"no profiles file ({' or '.join(map(str, profile_paths()))})")
    if not url:
        raise ProfileError(
            "no server: pass --url, set DIRIGENT_URL (`dirigent dev` prints it), or add a profile"
        )
    if url.lower().startswith(_DATABASE_SCHEMES):
        raise ProfileError(f"{url.split(':', 1)[0]}: URL is a database; the CLI talks to the API")
    ns = namespace or os.environ.get("DIRIGENT_NAMESPACE") or chosen.get("namespace") or "default"
    return Target(url.rstrip("/"), token, str(ns))
