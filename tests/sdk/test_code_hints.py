"""Every code's hint fits its code: a reviewed table names the remedy each hint must give
(the word a reader acts on), and a new code cannot land without a row here."""

from __future__ import annotations

import pytest

from lineup_sdk.codes import CODES

#: code -> the remedy keyword its hint names (case-insensitive). Reviewed by hand: the
#: keyword is what the reader does or uses next, not a word of the code's own name.
REMEDY: dict[str, str] = {
    "config_invalid": "lineup.toml",
    "surface_not_inlinable": "include",
    "entry_import_failed": "`entry`",
    "registry_missing": "define_agent_tools",
    "registry_multiple": "one registry",
    "invalid_method_name": "rename",
    "method_outside_scope": "app scope",
    "duplicate_method": "rename",
    "missing_handler": "@tools.handler",
    "handler_without_declaration": "tools.declare",
    "handler_signature_mismatch": "return type",
    "invalid_input_schema": "type: object",
    "invalid_result_schema": "return annotation",
    "remote_ref": "$defs",
    "unknown_runtime_handler": "catalog",
    "runtime_contract_mismatch": "catalog",
    "include_unsafe": "include",
    "include_secret": ".lineup/",
    "signing_key_missing": "lineup keygen",
    "signing_key_invalid": "ed25519",
    "missing_description": "docstring",
    "large_schema": "simplify",
    "schema_expensive": "flatten",
    "schema_too_complex": "one definition per level",
    "schema_not_compared": "64 levels",
    "config_shadowed": "[tool.lineup]",
    "init_target_not_empty": "folder",
    "template_unknown": "lineup init --help",
    "scope_invalid": "--scope",
    "bundle_unreadable": "lineup build",
    "bundle_layout_invalid": "lineup build",
    "bundle_not_canonical": "lineup build",
    "unsafe_path": "do not trust",
    "limits_exceeded": "--max-",
    "signature_missing": "signing key",
    "signature_invalid": "re-sign",
    "untrusted_key": "lineup trust add",
    "key_revoked": "current key",
    "weak_key": "lineup keygen",
    "scope_not_allowed": "scopes",
    "manifest_invalid": "lineup build",
    "file_missing": "lineup build",
    "file_hash_mismatch": "rebuild",
    "file_unlisted": "rebuild",
    "stale_bundle": "lineup build",
    "breaking_change": "major version",
    "trust_store_invalid": "lineup trust add",
    "trust_argument_invalid": "ed25519",
    "version_conflict": "bump the version",
    "downgrade_refused": "uninstall",
    "install_tampered": "reinstall",
    "sdk_incompatible": "sdk",
    "dependency_missing": "install the dependency",
    "runtime_locked": "another database",
    "store_schema_unsupported": "at least as new",
    "store_corrupt": "backup",
    "store_unavailable": "disk space",
    "unknown_method": "agent inventory",
    "invalid_params": "json pointers",
    "params_too_large": "max_params_bytes",
    "limit_exceeded": "unsubscribe",
    "call_id_conflict": "fresh call_id",
    "app_not_running": "activating tools",
    "unknown_action": "define_ui_actions",
    "action_id_conflict": "next seq",
    "action_out_of_order": "in order",
    "action_pending": "same action again",
    "activation_failed": "details.reason",
    "activation_cancelled": "details.reason",
    "handler_timeout": "timeout_s",
    "handler_failed": "worker log",
    "handler_result_invalid": "return",
    "delivery_interrupted": "read tool",
    "worker_protocol_error": "print",
    "session_data_revision_conflict": "revision",
    "session_data_write_not_allowed": "ctx.session_data.replace",
    "session_data_invalid": "json",
    "session_data_too_large": "store less",
    "pomodoro_already_active": "pomodoro.interrupt",
    "sandbox_unavailable": "best_effort",
    "permission_not_allowed": "--allow",
    "usage_invalid": "--help",
    "key_exists": "--out",
    "scenario_invalid": "scenario format",
    "expectation_failed": "expected",
    "tool_name_too_long": "shorten",
    "call_pending": "lineup-result",
    "call_not_found": "call_id",
    "scope_reserved": "another scope",
    "view_invalid": "Reload the View",
}


def test_every_code_has_a_reviewed_remedy() -> None:
    assert sorted(set(CODES) - set(REMEDY)) == []  # a new code: review its hint, add a row
    assert sorted(set(REMEDY) - set(CODES)) == []


@pytest.mark.parametrize("code", sorted(REMEDY))
def test_the_hint_names_its_remedy(code: str) -> None:
    hint = CODES[code][1]
    assert REMEDY[code].lower() in hint.lower(), (code, hint)


def test_the_signature_hint_speaks_of_annotations_not_only_dicts() -> None:
    """A decorated tool without a return annotation (the common case) is told to annotate,
    not to take a plain dict (which a decorated tool refuses)."""
    hint = CODES["handler_signature_mismatch"][1]
    assert "return type" in hint and "-> None" in hint
    assert not hint.startswith("Make the handler take `(ctx, params: dict)`")
