"""Connection secret sealing: round trip, binding to its row and field, key errors.

A unit test of ``infrastructure.crypto`` itself: it imports the module below the door on purpose.
"""

from __future__ import annotations

import base64

import pytest

from dirigent.engine.infrastructure.crypto import SealError, SecretSealer, WrongKeyError

KEY = bytes(range(32))
OTHER = bytes(range(1, 33))
WHERE = {"namespace": "team-a", "connection": "warehouse", "field": "password"}


def test_round_trip_and_fresh_nonce() -> None:
    sealer = SecretSealer(KEY)
    one = sealer.seal("s3cr3t ✓", **WHERE)
    two = sealer.seal("s3cr3t ✓", **WHERE)
    assert one != two  # random nonce per value
    assert "s3cr3t" not in one
    assert sealer.open(one, **WHERE) == "s3cr3t ✓"
    assert sealer.open(two, **WHERE) == "s3cr3t ✓"


@pytest.mark.parametrize(
    "elsewhere",
    [
        {**WHERE, "namespace": "team-b"},
        {**WHERE, "connection": "warehouse2"},
        {**WHERE, "field": "token"},
        # The binding is not a plain concatenation: shifting a separator must not match.
        {"namespace": "team-a", "connection": "warehouse\npassword", "field": ""},
    ],
)
def test_copied_ciphertext_does_not_open(elsewhere: dict[str, str]) -> None:
    sealer = SecretSealer(KEY)
    sealed = sealer.seal("value", **WHERE)
    with pytest.raises(SealError, match="another connection or field"):
        sealer.open(sealed, **elsewhere)


def test_wrong_key_is_named() -> None:
    sealed = SecretSealer(KEY).seal("value", **WHERE)
    with pytest.raises(WrongKeyError, match="different DIRIGENT_SECRET_KEY"):
        SecretSealer(OTHER).open(sealed, **WHERE)


def test_old_key_opens_and_asks_for_reseal() -> None:
    sealed = SecretSealer(KEY).seal("value", **WHERE)
    rotated = SecretSealer(OTHER, old_keys=[KEY])
    assert rotated.open(sealed, **WHERE) == "value"
    assert rotated.needs_reseal(sealed)
    assert not rotated.needs_reseal(rotated.seal("value", **WHERE))


def test_tampering_is_detected() -> None:
    sealer = SecretSealer(KEY)
    raw = bytearray(base64.b64decode(sealer.seal("value", **WHERE)))
    raw[-1] ^= 1
    with pytest.raises(SealError):
        sealer.open(base64.b64encode(bytes(raw)).decode(), **WHERE)


@pytest.mark.parametrize("garbage", ["", "not base64!", base64.b64encode(b"\x02" * 40).decode()])
def test_garbage_is_refused(garbage: str) -> None:
    with pytest.raises(SealError, match="not a sealed value"):
        SecretSealer(KEY).open(garbage, **WHERE)


def test_fields_helpers() -> None:
    sealer = SecretSealer(KEY)
    sealed = sealer.seal_fields({"user": "u", "password": "p"}, namespace="n", connection="c")
    assert set(sealed) == {"user", "password"}
    assert sealer.open_fields(sealed, namespace="n", connection="c") == {
        "user": "u",
        "password": "p",
    }
    swapped = {"user": sealed["password"], "password": sealed["user"]}
    with pytest.raises(SealError):
        sealer.open_fields(swapped, namespace="n", connection="c")


def test_key_length_checked() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        SecretSealer(b"short")


def test_from_settings() -> None:
    from dirigent.engine import EngineSettings

    settings = EngineSettings(secret_key=KEY.hex())
    sealed = SecretSealer.from_settings(settings).seal("v", **WHERE)
    assert SecretSealer(KEY).open(sealed, **WHERE) == "v"
