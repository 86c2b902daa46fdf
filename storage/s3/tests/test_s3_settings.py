"""Settings, URIs and part sizes: the decisions made before any request is sent."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import ValidationError

from dirigent.sdk import Contribution, StorageRefused, secret_fields
from dirigent.storage.s3 import S3Settings
from dirigent.storage.s3.plugin import plugin
from dirigent.storage.s3.settings import resolve
from dirigent.storage.s3.uris import Location, parse
from dirigent.storage.s3.writing import part_size_for


def test_explicit_settings_win_over_the_environment() -> None:
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_REGION": "eu-west-1"}
    chosen = S3Settings(endpoint_url="http://127.0.0.1:8333/", region="us-west-2", path_style=False)
    resolved = resolve(chosen, env)
    assert (resolved.endpoint_url, resolved.region, resolved.path_style) == (
        "http://127.0.0.1:8333",
        "us-west-2",
        False,
    )


@pytest.mark.parametrize(
    ("env", "endpoint", "region", "path_style"),
    [
        ({}, None, "us-east-1", False),
        ({"AWS_DEFAULT_REGION": "eu-west-1"}, None, "eu-west-1", False),
        (
            {"AWS_REGION": "ap-south-1", "AWS_DEFAULT_REGION": "eu-west-1"},
            None,
            "ap-south-1",
            False,
        ),
        ({"AWS_ENDPOINT_URL": "http://127.0.0.1:1"}, "http://127.0.0.1:1", "us-east-1", True),
        (
            {"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:2"},
            "http://127.0.0.1:2",
            "us-east-1",
            True,
        ),
    ],
)
def test_the_environment_fills_what_settings_leave_open(
    env: dict[str, str], endpoint: str | None, region: str, path_style: bool
) -> None:
    resolved = resolve(None, env)
    assert (resolved.endpoint_url, resolved.region, resolved.path_style) == (
        endpoint,
        region,
        path_style,
    )
    assert resolved.where == (endpoint or f"AWS S3 ({region})")


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"access_key_id": "AK"}, "set together"),
        ({"secret_access_key": "s"}, "set together"),
        ({"session_token": "t"}, "session_token needs"),
        ({"part_size": "1mb"}, "at least 5mb"),
        ({"copy_part_threshold": "6gb"}, "at most 5gb"),
        ({"endpoint_url": "127.0.0.1:8333"}, "String should match pattern"),
        ({"max_concurrency": 0}, "greater than or equal to 1"),
        ({"checksum": "MD5"}, "CRC32"),
        ({"bucket_name": "x"}, "Extra inputs are not permitted"),
    ],
)
def test_settings_refuse_what_cannot_work(fields: dict[str, object], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        S3Settings.model_validate(fields)


def test_the_secret_fields_are_secret() -> None:
    assert set(secret_fields(S3Settings)) == {"secret_access_key", "session_token"}
    shown = repr(S3Settings(access_key_id="AK", secret_access_key="very-secret"))
    assert "very-secret" not in shown


@pytest.mark.parametrize(
    ("uri", "location"),
    [
        ("s3://data/in/a.csv", Location("data", "in/a.csv")),
        ("s3://data/in/a b%20c.csv", Location("data", "in/a b%20c.csv")),  # literal, as the CLI
        ("s3://my.bucket-1/k", Location("my.bucket-1", "k")),
    ],
)
def test_object_uris(uri: str, location: Location) -> None:
    assert parse(uri) == location
    assert parse(uri).uri == uri


def test_prefix_uris_may_stop_at_the_bucket() -> None:
    assert parse("s3://data", object_key=False) == Location("data", "")
    assert parse("s3://data/", object_key=False) == Location("data", "")
    assert parse("s3://data/in/", object_key=False) == Location("data", "in/")


@pytest.mark.parametrize(
    ("uri", "says"),
    [
        ("file:///tmp/x", "only s3:// URIs"),
        ("s3:/data/x", "only s3:// URIs"),
        ("s3://Data/x", "not a valid S3 bucket name"),
        ("s3://ab/x", "not a valid S3 bucket name"),
        ("s3://a..b/x", "not a valid S3 bucket name"),
        ("s3://data", "names a prefix"),
        ("s3://data/dir/", "names a prefix"),
    ],
)
def test_bad_uris_are_refused(uri: str, says: str) -> None:
    with pytest.raises(StorageRefused, match=says):
        parse(uri)


def test_the_part_size_grows_to_fit_ten_thousand_parts() -> None:
    settings = S3Settings()
    assert part_size_for(settings, None) == 8 * 1024 * 1024
    assert part_size_for(settings, 1024**3) == 8 * 1024 * 1024
    grown = part_size_for(settings, 200 * 1024**3)  # 200 GiB
    assert grown * 10_000 >= 200 * 1024**3
    assert grown % (1024 * 1024) == 0


def test_the_plugin_contributes_the_scheme_and_its_connection_kind() -> None:
    contribution = plugin.contribute()
    assert isinstance(contribution, Contribution)
    (backend,) = contribution.storage_backends
    (kind,) = contribution.connection_kinds
    assert (type(backend).scheme, type(backend).connection_kind, type(kind).id) == (
        "s3",
        "s3",
        "s3",
    )
    assert type(backend).config_model is type(kind).config_model is S3Settings


def test_discovering_the_plugin_loads_no_s3_client() -> None:
    # Every dirigent process imports every plugin at start; the client waits for a store.
    code = (
        "import sys, dirigent.storage.s3.plugin as p; p.plugin.contribute(); "
        "print(sorted(m for m in ('aiobotocore', 'botocore', 'aiohttp') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
