"""The trust store: TOML round trip, strict parsing, weak keys, revocation, atomic save."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineup_build.signing import b64encode, key_id_of, public_pem
from lineup_build.trust import (
    TrustedKey,
    TrustStore,
    parse_public_key,
    read_public_key,
    trust_add,
    trust_revoke,
)
from lineup_sdk.errors import LineupError
from tests.build.bundle_kit import KEY, OTHER

PUB = b64encode(KEY.public_raw)
KID = KEY.key_id
assert PUB.endswith("w=")  # 'x' differs from 'w' only in bits base64 leaves unused here


def _entry(**over: str) -> str:
    fields = {"key_id": f'"{KID}"', "public_key": f'"{PUB}"', "scopes": '["todo"]'}
    fields.update(over)
    return "[[keys]]\n" + "".join(f"{k} = {v}\n" for k, v in fields.items() if v != "-")


def test_round_trip_through_toml() -> None:
    store = TrustStore()
    store.add(KEY.public_raw, ["todo", "notes"], label='CI "release" key\n\x7f')
    store.add(OTHER.public_raw, ["*"])
    store.revoke("0" * 32)
    again = TrustStore.parse(store.dumps())
    assert again.keys == store.keys
    assert again.revoked == {"0" * 32}
    assert again.dumps() == store.dumps()


@settings(max_examples=200, deadline=None)
@given(label=st.text())
def test_any_label_round_trips(label: str) -> None:
    store = TrustStore()
    store.add(KEY.public_raw, ["*"], label=label)
    assert TrustStore.parse(store.dumps()).keys[KID].label == label


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("keys = [", "trust_store_invalid"),
        ('extra = "x"\n', "trust_store_invalid"),
        ('keys = "nope"\n', "trust_store_invalid"),
        ("revoked = [1]\n", "trust_store_invalid"),
        ('revoked = ["ABC"]\n', "trust_store_invalid"),
        (_entry(public_key='"not base64"'), "trust_store_invalid"),
        (_entry(public_key=f'"{PUB[:-2]}x="'), "trust_store_invalid"),
        (_entry(public_key=f'"{b64encode(b"x" * 31)}"'), "trust_store_invalid"),
        (_entry(key_id='"' + "0" * 32 + '"'), "trust_store_invalid"),
        (_entry(key_id="-"), "trust_store_invalid"),
        (_entry(scopes="[]"), "trust_store_invalid"),
        (_entry(scopes='["Todo"]'), "trust_store_invalid"),
        (_entry(scopes='"todo"'), "trust_store_invalid"),
        (_entry(label="3"), "trust_store_invalid"),
        (_entry(comment='"x"'), "trust_store_invalid"),
        (_entry() + _entry(), "trust_store_invalid"),
        (
            _entry(public_key=f'"{b64encode(bytes(32))}"', key_id=f'"{key_id_of(bytes(32))}"'),
            "weak_key",
        ),
    ],
    ids=[
        "bad-toml",
        "unknown-top-level",
        "keys-not-array",
        "revoked-not-strings",
        "revoked-not-key-id",
        "key-not-base64",
        "key-noncanonical-base64",
        "key-31-bytes",
        "key-id-mismatch",
        "key-id-missing",
        "scopes-empty",
        "scope-uppercase",
        "scopes-not-array",
        "label-not-string",
        "unknown-key-field",
        "duplicate-key",
        "weak-key",
    ],
)
def test_malformed_stores_are_refused(text: str, code: str) -> None:
    with pytest.raises(LineupError) as caught:
        TrustStore.parse(text)
    assert caught.value.code == code


def test_load_reports_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(LineupError) as missing:
        TrustStore.load(tmp_path / "nope.toml")
    assert missing.value.code == "trust_store_invalid"
    (tmp_path / "bin.toml").write_bytes(b"\xff\xfe")
    with pytest.raises(LineupError) as binary:
        TrustStore.load(tmp_path / "bin.toml")
    assert binary.value.code == "trust_store_invalid"


def test_lookup_codes() -> None:
    store = TrustStore.from_keys([TrustedKey(KID, KEY.public_raw, ("todo",), None)])
    assert store.lookup(KID).allows("todo")
    assert not store.lookup(KID).allows("notes")
    with pytest.raises(LineupError) as untrusted:
        store.lookup(OTHER.key_id)
    assert untrusted.value.code == "untrusted_key"
    store.revoke(KID)
    with pytest.raises(LineupError) as revoked:
        store.lookup(KID)
    assert revoked.value.code == "key_revoked"


def test_wildcard_scope_allows_any() -> None:
    assert TrustedKey(KID, KEY.public_raw, ("*",), None).allows("anything")


@pytest.mark.parametrize(
    ("keys", "code"),
    [
        ([TrustedKey(key_id_of(bytes(32)), bytes(32), ("*",), None)], "weak_key"),
        ([TrustedKey(OTHER.key_id, KEY.public_raw, ("*",), None)], "trust_store_invalid"),
        ([TrustedKey(KID, KEY.public_raw, (), None)], "trust_store_invalid"),
    ],
    ids=["weak", "wrong-key-id", "no-scopes"],
)
def test_from_keys_validates(keys: list[TrustedKey], code: str) -> None:
    with pytest.raises(LineupError) as caught:
        TrustStore.from_keys(keys)
    assert caught.value.code == code


def test_add_refuses_revoked_and_bad_arguments() -> None:
    store = TrustStore()
    store.revoke(KID)
    with pytest.raises(LineupError) as revoked:
        store.add(KEY.public_raw, ["todo"])
    assert revoked.value.code == "key_revoked"
    for scopes in ([], ["Bad"], ["a b"]):
        with pytest.raises(LineupError) as bad:
            store.add(OTHER.public_raw, scopes)
        assert (bad.value.code, bad.value.exit_code) == ("trust_argument_invalid", 2)
    with pytest.raises(LineupError) as short:
        store.add(b"x" * 31, ["*"])
    assert short.value.code == "trust_argument_invalid"
    with pytest.raises(LineupError) as bad_id:
        store.revoke("xyz")
    assert bad_id.value.code == "trust_argument_invalid"


def test_add_again_replaces_scopes_and_label() -> None:
    store = TrustStore()
    store.add(KEY.public_raw, ["todo"], label="a")
    store.add(KEY.public_raw, ["notes", "notes"], label="b")
    assert store.keys[KID].scopes == ("notes",)
    assert store.keys[KID].label == "b"


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        (public_pem(KEY).decode(), True),
        (PUB, True),
        (f"  {PUB}\n", True),
        (PUB.rstrip("="), False),
        ("-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----\n", False),
        ("hello", False),
    ],
    ids=["pem", "base64", "base64-with-whitespace", "unpadded", "broken-pem", "garbage"],
)
def test_parse_public_key(text: str, ok: bool) -> None:
    if ok:
        assert parse_public_key(text) == KEY.public_raw
    else:
        with pytest.raises(LineupError) as caught:
            parse_public_key(text)
        assert caught.value.code == "trust_argument_invalid"


def test_parse_public_key_refuses_non_ed25519_pem() -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    pem = (
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    with pytest.raises(LineupError) as caught:
        parse_public_key(pem.decode())
    assert caught.value.code == "trust_argument_invalid"


def test_add_and_revoke_edit_the_file_atomically(tmp_path: Path) -> None:
    pem = tmp_path / "key.pub.pem"
    pem.write_bytes(public_pem(KEY))
    store_path = tmp_path / "conf" / "trust.toml"
    key = trust_add(store_path, str(pem), ["todo"], "ci")
    assert key.key_id == KID and read_public_key(str(pem)) == KEY.public_raw
    assert trust_revoke(store_path, KID) is True
    assert trust_revoke(store_path, OTHER.key_id) is False
    loaded = TrustStore.load(store_path)
    assert loaded.revoked == {KID, OTHER.key_id}
    assert loaded.keys[KID].label == "ci"
    assert sorted(p.name for p in store_path.parent.iterdir()) == ["trust.toml"]


def test_a_failed_add_leaves_the_file_untouched(tmp_path: Path) -> None:
    store_path = tmp_path / "trust.toml"
    trust_add(store_path, PUB, ["todo"])
    before = store_path.read_bytes()
    with pytest.raises(LineupError):
        trust_add(store_path, b64encode(bytes(32)), ["*"])
    assert store_path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trust.toml"]
