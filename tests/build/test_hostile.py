"""The hostile-input battery: every attack is generated here, named, and must fail with its
stable code without anything being written outside a temporary folder."""

from __future__ import annotations

import io
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lineup_build.bundle import BundleEntry
from lineup_build.manifest import serialize_manifest
from lineup_build.signing import b64encode
from lineup_build.trust import TrustedKey, TrustStore
from lineup_build.verify import Limits, VerifyError, check_bundle, verify_bundle
from tests.build.bundle_kit import (
    FILES,
    KEY,
    OTHER,
    Raw,
    canonical,
    entries,
    good_bundle,
    make_manifest,
    raw_from,
    raw_zip,
    runtime_tool,
    sdk_tool,
    sign,
    snapshot,
    trust,
)


@dataclass
class Case:
    id: str
    build: Callable[[], bytes]
    code: str
    store: Callable[[], TrustStore] = field(default=lambda: trust())
    limits: Limits = field(default_factory=Limits)


def _edit_raw(edit: Callable[[list[Raw]], None], **kw: Any) -> Callable[[], bytes]:
    def build() -> bytes:
        items = raw_from(entries())
        edit(items)
        return raw_zip(items, **kw)

    return build


def _with_entry(name: str, data: bytes = b"x") -> Callable[[], bytes]:
    return lambda: canonical([*entries(), BundleEntry(name, data)])


def _set(index: int, **fields: Any) -> Callable[[list[Raw]], None]:
    def edit(items: list[Raw]) -> None:
        for k, v in fields.items():
            setattr(items[index], k, v)

    return edit


def _both(*edits: Callable[[list[Raw]], None]) -> Callable[[list[Raw]], None]:
    def edit(items: list[Raw]) -> None:
        for e in edits:
            e(items)

    return edit


def _manifest(**kw: Any) -> Callable[[], bytes]:
    return lambda: good_bundle(manifest=make_manifest(**kw))


def _manifest_bytes_edit(old: bytes, new: bytes) -> Callable[[], bytes]:
    def build() -> bytes:
        mbytes = serialize_manifest(make_manifest())
        assert old in mbytes
        return good_bundle(manifest_bytes=mbytes.replace(old, new, 1))

    return build


def _sig_doc(**over: Any) -> Callable[[], bytes]:
    import json

    def build() -> bytes:
        mbytes = serialize_manifest(make_manifest())
        doc = json.loads(sign(mbytes))
        doc.update(over)
        return good_bundle(sig=json.dumps(doc).encode())

    return build


def _sig_value(change: Callable[[str], str]) -> Callable[[], bytes]:
    import json

    def build() -> bytes:
        mbytes = serialize_manifest(make_manifest())
        doc = json.loads(sign(mbytes))
        doc["signature"] = change(doc["signature"])
        return good_bundle(sig=json.dumps(doc).encode())

    return build


def _noncanonical_b64(text: str) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    body = text.rstrip("=")
    last = alphabet[alphabet.index(body[-1]) | 1]  # set an unused low bit
    assert last != body[-1]
    return body[:-1] + last + "=" * (len(text) - len(body))


def _rezipped(method: int) -> Callable[[], bytes]:
    def build() -> bytes:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression=method) as zf:
            for e in entries():
                zf.writestr(e.name, e.data)
        return buf.getvalue()

    return build


def _compressed() -> bytes:
    items = raw_from(entries())
    z = zlib.compressobj(9, zlib.DEFLATED, -15)
    items[-1].stored = z.compress(items[-1].data) + z.flush()
    items[-1].method = 8
    return raw_zip(items)


def _files(**changes: bytes | None) -> dict[str, bytes]:
    out = dict(FILES)
    for k, v in changes.items():
        path = k.replace("__", "/").replace("_py", ".py")
        if v is None:
            out.pop(path)
        else:
            out[path] = v
    return out


def _file_content_differs(new: bytes) -> Callable[[], bytes]:
    """Manifest lists FILES; the archive carries `new` for todo_app/tools.py."""

    def build() -> bytes:
        manifest = make_manifest(FILES)
        return canonical(entries(_files(todo_app__tools_py=new), manifest=manifest))

    return build


def _signed_by_other_claiming_key() -> bytes:
    mbytes = serialize_manifest(make_manifest())
    return good_bundle(sig=sign(mbytes, OTHER, key_id=KEY.key_id))


def _tampered_after_signing() -> bytes:
    mbytes = serialize_manifest(make_manifest())
    forged = mbytes.replace(b'"To-do"', b'"Evil!"')
    return good_bundle(manifest_bytes=forged, sig=sign(mbytes))


def _no_domain_separation() -> bytes:
    import json

    mbytes = serialize_manifest(make_manifest())
    raw = KEY.private.sign(mbytes)
    doc = {"algorithm": "ed25519", "key_id": KEY.key_id, "signature": b64encode(raw)}
    return good_bundle(sig=json.dumps(doc).encode())


def _weak_store() -> TrustStore:
    """A store object that a weak key was forced into (bypassing `from_keys`)."""
    from lineup_build.signing import key_id_of

    weak = b"\x01" + b"\x00" * 31  # the identity point
    store = TrustStore()
    store.keys[KEY.key_id] = TrustedKey(KEY.key_id, weak, ("*",), None)
    assert key_id_of(weak) != KEY.key_id
    return store


def _forged_for_weak_key() -> bytes:
    import json

    mbytes = serialize_manifest(make_manifest())
    forged = b"\x01" + b"\x00" * 63  # R = identity, S = 0: "valid" for the identity key
    doc = {"algorithm": "ed25519", "key_id": KEY.key_id, "signature": b64encode(forged)}
    return good_bundle(manifest_bytes=mbytes, sig=json.dumps(doc).encode())


def _many_files(n: int) -> Callable[[], bytes]:
    return lambda: canonical(
        [
            BundleEntry("manifest.json", b"{}"),
            BundleEntry("manifest.sig", b"{}"),
            *(BundleEntry(f"app/f{i:05d}", b"") for i in range(n)),
        ]
    )


def _deep() -> bytes:
    deep = b'"result_schema":' + b'{"not":' * 100 + b"{}" + b"}" * 100
    mbytes = serialize_manifest(make_manifest()).replace(b'"result_schema":{"type":"object"}', deep)
    return good_bundle(manifest_bytes=mbytes)


def _huge_manifest() -> bytes:
    manifest = make_manifest(tools=[sdk_tool(description="x" * (5 * 1024 * 1024))])
    return good_bundle(manifest=manifest)


def _schema(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "additionalProperties": False}


DEC_E = "cafe\u0301"
CASES = [
    # --- archive framing ---
    Case("empty-file", lambda: b"", "bundle_unreadable"),
    Case("not-a-zip", lambda: b"#!/bin/sh\necho pwned\n" * 10, "bundle_unreadable"),
    Case("truncated-archive", lambda: good_bundle()[:200], "bundle_unreadable"),
    Case("bytes-prepended", lambda: b"MZ" + b"\0" * 510 + good_bundle(), "bundle_not_canonical"),
    Case("bytes-appended", lambda: good_bundle() + b"\0" * 100, "bundle_not_canonical"),
    Case("archive-comment", _edit_raw(lambda i: None, comment=b"hi"), "bundle_not_canonical"),
    Case("rezipped-stored", _rezipped(zipfile.ZIP_STORED), "bundle_not_canonical"),
    Case("rezipped-deflated", _rezipped(zipfile.ZIP_DEFLATED), "bundle_not_canonical"),
    Case("compressed-entry", _compressed, "bundle_not_canonical"),
    Case("encrypted-entry", _edit_raw(_set(2, flags=0x0801)), "bundle_not_canonical"),
    Case("data-descriptor-flag", _edit_raw(_set(2, flags=0x0808)), "bundle_not_canonical"),
    Case(
        "entries-out-of-order",
        lambda: canonical(list(reversed(entries()))),
        "bundle_not_canonical",
    ),
    Case("mixed-timestamps", _edit_raw(_set(3, stamp=(0, 0x21))), "bundle_not_canonical"),
    Case(
        "impossible-timestamp",
        _edit_raw(lambda i: None, stamp=(0, (45 << 9) | (13 << 5) | 1)),
        "bundle_not_canonical",
    ),
    Case(
        "extra-field",
        _edit_raw(_set(2, local_extra=b"UT\x05\x00\x01\x00\x00\x00\x00")),
        "bundle_not_canonical",
    ),
    Case("executable-mode", _edit_raw(_set(3, mode=0o100755)), "bundle_not_canonical"),
    Case("dos-made-by", _edit_raw(_set(3, made_by=0x0014, mode=0)), "bundle_not_canonical"),
    # --- names and entry types ---
    Case(
        "local-name-differs",
        _edit_raw(_set(4, local_name=b"app/todo_app/toolz.py")),
        "unsafe_path",
    ),
    Case("duplicate-entry", _with_entry("app/todo_app/tools.py"), "unsafe_path"),
    Case("case-collision", _with_entry("app/TODO_APP/tools.py"), "unsafe_path"),
    Case(
        "nfc-collision",
        lambda: canonical(
            [*entries(), BundleEntry("app/caf\u00e9", b"1"), BundleEntry(f"app/{DEC_E}", b"2")]
        ),
        "unsafe_path",
    ),
    Case("not-nfc", _with_entry(f"app/{DEC_E}"), "unsafe_path"),
    Case("dotdot-traversal", _with_entry("app/../../evil.py"), "unsafe_path"),
    Case("dotdot-leading", _with_entry("../evil.py"), "unsafe_path"),
    Case("absolute-path", _with_entry("/etc/cron.d/evil"), "unsafe_path"),
    Case("backslash", _with_entry("app\\..\\evil.py"), "unsafe_path"),
    Case("drive-letter", _with_entry("C:/Windows/evil.dll"), "unsafe_path"),
    Case("drive-relative", _with_entry("c:evil"), "unsafe_path"),
    Case("control-char", _with_entry("app/a\x07.py"), "unsafe_path"),
    Case("newline-in-name", _with_entry("app/a\nb.py"), "unsafe_path"),
    Case("dot-segment", _with_entry("app/./x.py"), "unsafe_path"),
    Case("empty-segment", _with_entry("app//x.py"), "unsafe_path"),
    Case("non-utf8-name", _edit_raw(_set(4, name=b"app/\xff.py")), "unsafe_path"),
    Case(
        "non-ascii-without-utf8-flag",
        _edit_raw(_set(4, name="app/é.py".encode(), flags=0)),
        "unsafe_path",
    ),
    Case("symlink-entry", _edit_raw(_set(3, mode=0o120777)), "unsafe_path"),
    Case("directory-entry", _with_entry("app/dir/", b""), "unsafe_path"),
    Case("directory-posing-as-file", _edit_raw(_set(3, mode=0o040755)), "unsafe_path"),
    Case("dos-directory-attribute", _edit_raw(_set(3, ext_low=0x10)), "unsafe_path"),
    Case("fifo-entry", _edit_raw(_set(3, mode=0o010644)), "unsafe_path"),
    # --- limits ---
    Case("10001-files", _many_files(10_001), "limits_exceeded"),
    Case(
        "total-size-over-limit", good_bundle, "limits_exceeded", limits=Limits(max_total_bytes=500)
    ),
    Case("path-over-limit", good_bundle, "limits_exceeded", limits=Limits(max_path_bytes=16)),
    Case("600-byte-name", _with_entry("app/" + "a" * 596), "limits_exceeded"),
    Case("manifest-5mib", _huge_manifest, "limits_exceeded"),
    Case("manifest-100-deep", _deep, "limits_exceeded"),
    Case(
        "oversized-central-directory",
        _edit_raw(
            _both(_set(2, central_extra=b"\0" * 65000), _set(3, central_extra=b"\0" * 65000))
        ),
        "limits_exceeded",
    ),
    # --- layout ---
    Case("entry-outside-layout", _with_entry("evil.txt"), "bundle_layout_invalid"),
    Case("folder-outside-layout", _with_entry("lib/evil.py"), "bundle_layout_invalid"),
    Case("manifest-missing", lambda: canonical(entries()[1:]), "bundle_layout_invalid"),
    Case("empty-zip", lambda: raw_zip([]), "bundle_layout_invalid"),
    Case(
        "signature-missing",
        lambda: canonical([entries()[0], *entries()[2:]]),
        "signature_missing",
    ),
    # --- signature and trust ---
    Case("signed-by-untrusted-key", lambda: good_bundle(key=OTHER), "untrusted_key"),
    Case("other-key-claims-trusted-id", _signed_by_other_claiming_key, "signature_invalid"),
    Case("manifest-changed-after-signing", _tampered_after_signing, "signature_invalid"),
    Case("signature-without-domain", _no_domain_separation, "signature_invalid"),
    Case("signature-truncated", _sig_value(lambda s: s[:-8]), "signature_invalid"),
    Case("signature-not-base64", _sig_value(lambda s: "!" * len(s)), "signature_invalid"),
    Case("signature-noncanonical-base64", _sig_value(_noncanonical_b64), "signature_invalid"),
    Case("signature-wrong-algorithm", _sig_doc(algorithm="rsa-sha256"), "signature_invalid"),
    Case("signature-extra-field", _sig_doc(note="trust me"), "signature_invalid"),
    Case("signature-not-json", lambda: good_bundle(sig=b"ed25519:abc"), "signature_invalid"),
    Case("key-revoked", good_bundle, "key_revoked", store=lambda: trust(revoked=(KEY.key_id,))),
    Case(
        "key-scope-not-allowed",
        good_bundle,
        "scope_not_allowed",
        store=lambda: trust(scopes=("notes",)),
    ),
    Case("weak-key-forced-into-store", _forged_for_weak_key, "weak_key", store=_weak_store),
    # --- manifest ---
    Case(
        "manifest-duplicate-keys",
        _manifest_bytes_edit(b'"manifest_version":1', b'"manifest_version":1,"manifest_version":1'),
        "manifest_invalid",
    ),
    Case(
        "manifest-nan",
        _manifest_bytes_edit(b'"timeout_s":30', b'"timeout_s":NaN'),
        "manifest_invalid",
    ),
    Case(
        "manifest-infinity",
        _manifest_bytes_edit(b'"timeout_s":30', b'"timeout_s":1e999'),
        "manifest_invalid",
    ),
    Case(
        "manifest-not-utf8",
        _manifest_bytes_edit(b'"To-do"', b'"To-\xff"'),
        "manifest_invalid",
    ),
    Case(
        "manifest-added-field",
        lambda: good_bundle(manifest={**make_manifest(), "hooks": {"postinstall": "rm -rf /"}}),
        "manifest_invalid",
    ),
    Case(
        "tool-added-field",
        _manifest(tools=[sdk_tool(handler="os.system")]),
        "manifest_invalid",
    ),
    Case("manifest-not-object", lambda: good_bundle(manifest_bytes=b"[1,2]"), "manifest_invalid"),
    Case(
        "manifest-lists-file-twice",
        lambda: good_bundle(manifest={**make_manifest(), "files": make_manifest()["files"] * 2}),
        "manifest_invalid",
    ),
    # --- tools ---
    Case(
        "tool-remote-ref",
        _manifest(tools=[sdk_tool(input_schema=_schema(a={"$ref": "https://evil.example/s"}))]),
        "remote_ref",
    ),
    Case(
        "tool-file-ref",
        _manifest(tools=[sdk_tool(result_schema={"$ref": "file:///etc/passwd"})]),
        "remote_ref",
    ),
    Case(
        "tool-forbidden-keyword",
        _manifest(tools=[sdk_tool(input_schema={**_schema(), "$id": "https://x"})]),
        "invalid_input_schema",
    ),
    Case(
        "tool-input-not-object",
        _manifest(tools=[sdk_tool(input_schema={"type": "array"})]),
        "invalid_input_schema",
    ),
    Case(
        "tool-backtracking-pattern",
        _manifest(
            tools=[sdk_tool(input_schema=_schema(a={"type": "string", "pattern": "(a)\\1"}))]
        ),
        "invalid_input_schema",
    ),
    Case(
        "tool-result-not-schema",
        _manifest(tools=[sdk_tool(result_schema={"type": "nope"})]),
        "invalid_result_schema",
    ),
    Case(
        "tool-method-outside-scope",
        _manifest(tools=[sdk_tool("notes.add")]),
        "method_outside_scope",
    ),
    Case(
        "tool-duplicate-method",
        _manifest(tools=[sdk_tool(), sdk_tool()]),
        "duplicate_method",
    ),
    Case(
        "runtime-unknown-handler",
        _manifest(tools=[runtime_tool("todo.start", "pomodoro.start", handler_key="todo.nope")]),
        "unknown_runtime_handler",
    ),
    Case(
        "runtime-key-of-other-scope",
        _manifest(tools=[runtime_tool("todo.start", "pomodoro.start")]),
        "runtime_contract_mismatch",
    ),
    Case(
        "runtime-activation-differs",
        _manifest(
            scope="pomodoro",
            tools=[runtime_tool("pomodoro.start", "pomodoro.start", activation="app_ready")],
        ),
        "runtime_contract_mismatch",
    ),
    Case(
        "runtime-schema-differs",
        _manifest(
            scope="pomodoro",
            tools=[
                runtime_tool(
                    "pomodoro.interrupt",
                    "pomodoro.interrupt",
                    input_schema=_schema(x={"type": "string"}),
                )
            ],
        ),
        "runtime_contract_mismatch",
    ),
    # --- files ---
    Case(
        "extra-unlisted-file",
        lambda: canonical(entries(_files(todo_app__extra_py=b"x"), manifest=make_manifest())),
        "file_unlisted",
    ),
    Case(
        "listed-file-missing",
        lambda: canonical(entries(_files(todo_app__tools_py=None), manifest=make_manifest())),
        "file_missing",
    ),
    Case(
        "one-flipped-byte",
        _file_content_differs(
            b"from lineup_sdk import define_agent_toolz\n" + FILES["todo_app/tools.py"][42:]
        ),
        "file_hash_mismatch",
    ),
    Case(
        "longer-file-matching-prefix",
        _file_content_differs(FILES["todo_app/tools.py"] + b"import os; os.system('x')\n"),
        "file_hash_mismatch",
    ),
    Case(
        "truncated-file",
        _file_content_differs(FILES["todo_app/tools.py"][:-1]),
        "file_hash_mismatch",
    ),
    Case(
        "manifest-lists-traversal-path",
        lambda: good_bundle(
            manifest={
                **make_manifest(),
                "files": [
                    *make_manifest()["files"],
                    {"path": "../x", "sha256": "0" * 64, "size": 0},
                ],
            }
        ),
        "unsafe_path",
    ),
]


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder for the bundle; cwd and the temp folder point at empty folders beside it."""
    for name in ("bundles", "cwd", "tmp"):
        (tmp_path / name).mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    return tmp_path


def test_battery_is_large_and_named_uniquely() -> None:
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)


def test_the_unmodified_bundle_verifies(tmp_path: Path) -> None:
    path = tmp_path / "good.lineup"
    path.write_bytes(good_bundle())
    assert verify_bundle(path, trust()).key_id == KEY.key_id


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_bundle_is_rejected_with_its_code(case: Case, sandbox: Path) -> None:
    path = sandbox / "bundles" / "hostile.lineup"
    path.write_bytes(case.build())
    store = case.store()
    before = snapshot(sandbox)
    with pytest.raises(VerifyError) as caught:
        verify_bundle(path, store, limits=case.limits)
    assert caught.value.code == case.code, [p.to_dict() for p in caught.value.problems]
    assert caught.value.problems[0].code == case.code
    report = check_bundle(path, store, limits=case.limits)
    assert not report.ok
    assert report.problems[0].code == case.code
    assert snapshot(sandbox) == before  # nothing written anywhere, not even in temp


WEAK_KEYS = {
    "all-zero": b"\x00" * 32,
    "identity": b"\x01" + b"\x00" * 31,
    "order-2-point": ((2**255 - 19) - 1).to_bytes(32, "little"),
    "identity-sign-bit": b"\x01" + b"\x00" * 30 + b"\x80",
}


@pytest.mark.parametrize("raw", WEAK_KEYS.values(), ids=WEAK_KEYS.keys())
def test_trust_store_holding_weak_key_is_refused(raw: bytes, sandbox: Path) -> None:
    from lineup_build.signing import key_id_of

    text = (
        f'[[keys]]\nkey_id = "{key_id_of(raw)}"\npublic_key = "{b64encode(raw)}"\nscopes = ["*"]\n'
    )
    path = sandbox / "bundles" / "trust.toml"
    path.write_text(text)
    before = snapshot(sandbox)
    with pytest.raises(Exception) as caught:
        TrustStore.load(path)
    assert getattr(caught.value, "code", None) == "weak_key"
    with pytest.raises(Exception) as added:
        TrustStore().add(raw, ["*"])
    assert getattr(added.value, "code", None) == "weak_key"
    assert snapshot(sandbox) == before


def _manifest_of(raw: bytes) -> Any:
    import json

    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as zf:
            return json.loads(zf.read("manifest.json"))
    except Exception:  # not a readable zip or manifest: nothing for the schema to judge
        return None


def test_the_structural_manifest_check_agrees_with_the_schema_on_the_battery() -> None:
    # verify skips the JSON Schema validator when `plainly_valid` says True; on every
    # hostile manifest that parses, True must mean the shipped schema accepts it too
    from lineup_build.manifest import manifest_schema_errors
    from lineup_build.manifest_checks import plainly_valid, schema_problems

    judged = 0
    for case in CASES:
        doc = _manifest_of(case.build())
        if doc is None:
            continue
        judged += 1
        slow = manifest_schema_errors(doc)
        if plainly_valid(doc):
            assert slow == [], case.id
        assert bool(schema_problems(doc)) == bool(slow), case.id
    assert judged >= 20
