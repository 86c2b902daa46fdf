"""Which server and token the CLI uses: flags, then environment, then a profile; never a database."""

from __future__ import annotations

from pathlib import Path

import pytest

from dirigent.cli.profiles import ProfileError, resolve_target


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # The environment is an input here, not our code: clear the variables under test.
    for name in ("DIRIGENT_URL", "DIRIGENT_TOKEN", "DIRIGENT_PROFILE", "DIRIGENT_NAMESPACE"):
        monkeypatch.delenv(name, raising=False)


def write(tmp_path: Path, text: str) -> list[Path]:
    path = tmp_path / "profiles.yaml"
    path.write_text(text)
    return [path]


def test_flags_win_over_environment_and_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = write(tmp_path, "default: a\nprofiles:\n  a: {url: http://profile, token: p}\n")
    monkeypatch.setenv("DIRIGENT_URL", "http://env")
    monkeypatch.setenv("DIRIGENT_TOKEN", "e")
    assert resolve_target("http://flag/", "f", paths=paths).url == "http://flag"
    got = resolve_target(paths=paths)
    assert (got.url, got.token) == ("http://env", "e")


def test_the_default_profile_supplies_url_token_and_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = write(
        tmp_path,
        "default: dev\nprofiles:\n  dev: {url: http://127.0.0.1:8080, token_env: MY_TOKEN, namespace: team}\n",
    )
    monkeypatch.setenv("MY_TOKEN", "from-env")
    got = resolve_target(paths=paths)
    assert (got.url, got.token, got.namespace) == ("http://127.0.0.1:8080", "from-env", "team")


def test_a_token_command_is_run(tmp_path: Path) -> None:
    paths = write(tmp_path, "profiles:\n  x: {url: http://h, token_cmd: 'echo minted'}\n")
    assert resolve_target(profile="x", paths=paths).token == "minted"


@pytest.mark.parametrize(
    "profile",
    [
        "{url: 'postgresql+asyncpg://postgres@127.0.0.1/x'}",
        "{url: http://h, database_url: 'postgresql://x'}",
    ],
)
def test_a_profile_naming_a_database_is_refused(tmp_path: Path, profile: str) -> None:
    paths = write(tmp_path, f"profiles:\n  bad: {profile}\n")
    with pytest.raises(ProfileError, match="names a database"):
        resolve_target(profile="bad", paths=paths)


def test_a_database_url_in_the_environment_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIRIGENT_URL", "postgresql://postgres@127.0.0.1/x")
    with pytest.raises(ProfileError, match="URL is a database"):
        resolve_target(paths=[])


def test_no_server_anywhere_says_where_to_get_one() -> None:
    with pytest.raises(ProfileError, match="DIRIGENT_URL"):
        resolve_target(paths=[])


def test_an_unknown_profile_names_the_ones_there(tmp_path: Path) -> None:
    paths = write(tmp_path, "profiles:\n  a: {url: http://a}\n  b: {url: http://b}\n")
    with pytest.raises(ProfileError, match=r"no profile 'c' \(it has: a, b\)"):
        resolve_target(profile="c", paths=paths)
