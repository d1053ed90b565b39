"""Every stable error and diagnostic code, with its meaning and fix (the error reference,
`docs/reference/errors.md`, is generated from it)."""

from __future__ import annotations

# code -> (meaning, fix). Never rename or reuse a code; add a new one for a new failure.
CODES: dict[str, tuple[str, str]] = {
    # --- build (SPEC 2) ---
    "config_invalid": (
        "`lineup.toml` (or `pyproject.toml`'s `[tool.lineup]`) is missing, unparsable, or a "
        "field is invalid.",
        "Fix the named key in lineup.toml (see the project and manifest reference).",
    ),
    "surface_not_inlinable": (
        "The Surface page references something `lineup build` cannot inline into its one "
        "document: an external URL, a missing file, an import other than `/_lineup/sdk.js`.",
        "Ship the file in `include` and reference it by a relative path, or bundle a "
        "multi-module Surface with your own bundler into one file listed in `include`.",
    ),
    "entry_import_failed": (
        "The entry module could not be imported from the staged bundle files.",
        "Make sure `entry` names a module inside the `include` globs and imports cleanly.",
    ),
    "registry_missing": (
        "The entry module defines no `define_agent_tools(...)` registry.",
        "Call `tools = define_agent_tools(app_scope=...)` in the entry module.",
    ),
    "registry_multiple": (
        "More than one `define_agent_tools(...)` registry, or more than one "
        "`define_ui_actions(...)` registry, was defined.",
        "Keep exactly one registry of each per MiniApp and import it where needed.",
    ),
    "invalid_method_name": (
        "A method name does not match `<scope>.<verb>` with lowercase `[a-z][a-z0-9_]*` segments.",
        "Rename the method, e.g. `todo.add`.",
    ),
    "method_outside_scope": (
        "A method's first segment is not the registry's app scope.",
        "Prefix the method with the app scope from lineup.toml.",
    ),
    "duplicate_method": (
        "The same method is declared more than once: as two tools, two UI Actions, or a "
        "tool and a UI Action (they share one namespace).",
        "Remove or rename one of the two declarations.",
    ),
    "missing_handler": (
        "A `miniapp_sdk` tool was declared without a handler.",
        "Add `@tools.handler(method)` on a function, or declare it with `@tools.tool`.",
    ),
    "handler_without_declaration": (
        "`@tools.handler(method)` names a method that was never declared.",
        "Declare the method with `tools.declare(...)` first, or use `@tools.tool`.",
    ),
    "handler_signature_mismatch": (
        "A handler's parameters or return annotation disagree with the declared schemas.",
        "Annotate the handler as its tool needs: typed parameters (or one pydantic model) "
        "and a return type (`-> None` for no result); a `tools.declare` tool's handler "
        "takes `(ctx, params: dict)` or a model producing the declared schemas.",
    ),
    "invalid_input_schema": (
        "An input schema is not valid JSON Schema 2020-12, not an object, or uses a "
        "forbidden keyword or an unsupported pattern.",
        "Use a closed `type: object` schema without $id/$dynamicRef/$vocabulary.",
    ),
    "invalid_result_schema": (
        "A result schema is not valid JSON Schema 2020-12 or uses a forbidden keyword "
        "or an unsupported pattern.",
        "Fix the return annotation or the declared result schema.",
    ),
    "remote_ref": (
        "A schema `$ref` points outside the schema (network or file reference).",
        "Inline the referenced schema under `$defs` and use `#/$defs/...`.",
    ),
    "unknown_runtime_handler": (
        "`runtime_tool` names a handler key that is not in the runtime handler catalog.",
        "Use a key from `lineup_sdk.catalog.CATALOG` (e.g. `pomodoro.start`).",
    ),
    "runtime_contract_mismatch": (
        "A runtime tool's activation or schemas differ from the catalog, or its scope "
        "may not use that key.",
        "Declare the runtime tool with the catalog's activation and no custom schemas.",
    ),
    "include_unsafe": (
        "An included path escapes the project, is a symlink, or is not a regular file.",
        "Narrow the `include` globs to regular files inside the project.",
    ),
    "include_secret": (
        "An included file holds a private key.",
        "Move the key out of the included files (keys live in .lineup/ or CI secrets).",
    ),
    "signing_key_missing": (
        "No signing key was given.",
        "Run `lineup keygen` and pass `--key FILE` or LINEUP_SIGNING_KEY, or use `--dev-key`.",
    ),
    "signing_key_invalid": (
        "The signing key is unreadable, not Ed25519, or the passphrase is wrong.",
        "Pass a PKCS#8 Ed25519 PEM; set LINEUP_SIGNING_KEY_PASSPHRASE if it is encrypted.",
    ),
    "missing_description": (
        "Warning: a tool or parameter has no description.",
        "Add a docstring, `description=`, or `Field(description=...)`.",
    ),
    "large_schema": (
        "Warning: a schema is over 64 KiB of canonical JSON.",
        "Simplify the schema; Agents pay for every byte of it.",
    ),
    "schema_expensive": (
        "Warning: validating one value against a schema may apply more than 10,000 subschemas (`$ref`s followed) or the schema nests more than 32 levels; it is validated in a validator process under the runtime's validation budget (default 1 s per value).",
        'Flatten nested `anyOf`/`oneOf`/`allOf` of shared `$ref`s; a value over the budget is refused with `details.reason = "validation_budget"`.',
    ),
    "schema_too_complex": (
        "A schema may apply more than 1,000,000 subschemas to one value (`$ref`s followed; about 18 levels of two-way `anyOf` of one `$ref`) or nests more than 64 levels; `build`, `verify` and `install` refuse it.",
        "Do not nest `anyOf`/`oneOf`/`allOf` of the same `$ref` inside each other; use one definition per level, an `enum` or a discriminated union.",
    ),
    "schema_not_compared": (
        "`lineup diff` could not compare part of a schema (nested past the validation depth of 64 levels, or too large to walk); it counts as breaking (fail safe).",
        "Compare the named part by hand, or simplify the schema so both versions nest at most 64 levels.",
    ),
    "config_shadowed": (
        "Warning: a project has both `lineup.toml` and a `[tool.lineup]` table in "
        "`pyproject.toml`; `lineup.toml` is read.",
        "Keep the project in one place: delete lineup.toml or the [tool.lineup] table.",
    ),
    "init_target_not_empty": (
        "`lineup init` target folder exists, is not empty, and does not hold exactly what "
        "that init generates (an unchanged generated project is left as it is).",
        "Choose a new folder name or empty the folder first.",
    ),
    "template_unknown": (
        "`lineup init --template` names a template that does not exist.",
        "Use one of the templates listed by `lineup init --help`.",
    ),
    "scope_invalid": (
        "An app scope is not a lowercase `[a-z][a-z0-9_]*` name.",
        "Pass `--scope` with a valid name, e.g. `--scope my_todo`.",
    ),
    # --- verify and trust (SPEC 4) ---
    "bundle_unreadable": (
        "The bundle is empty, missing, or not a zip archive.",
        "Rebuild the bundle with `lineup build`.",
    ),
    "bundle_layout_invalid": (
        "The bundle holds an entry outside `manifest.json`, `manifest.sig`, `app/...`.",
        "Rebuild the bundle with `lineup build`; never edit bundles by hand.",
    ),
    "bundle_not_canonical": (
        "The archive is not in the exact form `lineup build` writes (re-zipped or edited).",
        "Rebuild the bundle with `lineup build`; compress for transport outside it.",
    ),
    "unsafe_path": (
        "An entry name is unsafe (traversal, absolute, backslash, control character, collision).",
        "Rebuild from a clean source tree; do not trust this bundle.",
    ),
    "limits_exceeded": (
        "The bundle or its manifest exceeds a size, count or depth limit.",
        "Reduce the bundle's files or schema size, or raise the limit: `--max-manifest-bytes`, "
        "`--max-files`, `--max-total-bytes` on build and verify, `[limits]` in lineup.toml, "
        "`Runtime.open(bundle_limits=Limits(...))`.",
    ),
    "signature_missing": (
        "The bundle has no `manifest.sig`.",
        "Build the bundle with a signing key.",
    ),
    "signature_invalid": (
        "The signature does not verify, or `manifest.sig` is malformed.",
        "The bundle was altered or signed with another key; rebuild and re-sign it.",
    ),
    "untrusted_key": (
        "The signing key is not in the trust store.",
        "Add the publisher's public key with `lineup trust add` if you trust it.",
    ),
    "key_revoked": (
        "The signing key is revoked in the trust store.",
        "Ask the publisher for a bundle signed with a current key.",
    ),
    "weak_key": (
        "A public key is a weak (small-order) Ed25519 key.",
        "Remove that key; generate a real one with `lineup keygen`.",
    ),
    "scope_not_allowed": (
        "The signing key is not allowed to sign for this app scope.",
        "Add the scope to the key's `scopes` in the trust store if intended.",
    ),
    "manifest_invalid": (
        "`manifest.json` is not strict JSON or does not match the manifest schema.",
        "Rebuild the bundle with `lineup build`; manifests are never hand-written.",
    ),
    "file_missing": (
        "A file listed in the manifest is not in the bundle.",
        "Rebuild the bundle with `lineup build`.",
    ),
    "file_hash_mismatch": (
        "A bundled file's size or SHA-256 differs from the manifest.",
        "The bundle was altered; rebuild it.",
    ),
    "file_unlisted": (
        "The bundle holds an `app/` file the manifest does not list.",
        "The bundle was altered; rebuild it.",
    ),
    "stale_bundle": (
        "The bundle's manifest differs from a fresh build of the source.",
        "Run `lineup build` again and commit or publish the new bundle.",
    ),
    # --- diff and docs (SPEC 11) ---
    "breaking_change": (
        "`lineup diff` found a change that breaks Agents written against the old release, "
        "without a major version bump.",
        "Restore compatibility, or bump the major version (for 0.y.z the minor, for 0.0.z "
        "any); the report names each tool, field and rule.",
    ),
    "trust_store_invalid": (
        "The trust store file is unreadable or malformed.",
        "Fix the named entry, or recreate it with `lineup trust add`.",
    ),
    "trust_argument_invalid": (
        "A public key, key id or scope given to `lineup trust` is malformed.",
        "Pass an Ed25519 public key (PEM file or base64 of the raw 32 bytes), a 32-hex "
        "key id, and scopes like `todo` or `*`.",
    ),
    # --- install (SPEC 4, 5.1) ---
    "version_conflict": (
        "The same scope and version is installed with a different manifest.",
        "Bump the version in lineup.toml and rebuild.",
    ),
    "downgrade_refused": (
        "A lower version of an installed scope was offered.",
        "Install a version at least as high, or uninstall the scope first.",
    ),
    "install_tampered": (
        "An installed app's files no longer match its manifest.",
        "Reinstall the bundle.",
    ),
    "sdk_incompatible": (
        "The bundle was built by an SDK major version this runtime does not support.",
        "Rebuild the MiniApp with a compatible lineup SDK.",
    ),
    "dependency_missing": (
        "A dependency listed in the manifest is not importable in the runtime's environment.",
        "Install the dependency into the runtime's Python environment.",
    ),
    # --- runtime (SPEC 5) ---
    "runtime_locked": (
        "Another runtime already has this database open.",
        "Close the other runtime, or use another database file.",
    ),
    "store_schema_unsupported": (
        "The database was written by a newer (or unknown) store schema; older LineUp "
        "schemas are migrated on open.",
        "Use a runtime at least as new as the one that wrote the database.",
    ),
    "store_corrupt": (
        "The database file is damaged, truncated, or not a LineUp database.",
        "Restore the database from a backup, or point the runtime at another file.",
    ),
    "store_unavailable": (
        "The database could not be written or read (read-only, full, busy, or an I/O "
        "error); the operation changed nothing.",
        "Free disk space or fix the file system's permissions, then retry the same call.",
    ),
    "unknown_method": (
        "No installed app declares this method.",
        "Read the Agent Inventory for the available methods.",
    ),
    "invalid_params": (
        "The call's params do not match the tool's input schema or are not strict JSON, "
        "or its call_id or conversation_id is not 1–200 characters without control "
        "characters.",
        "Correct the params at the JSON pointers listed in `details` (integers within "
        "±(2^53 − 1), nesting ≤ 64, no NaN/Infinity, valid Unicode).",
    ),
    "params_too_large": (
        "The call's params are over the runtime's limit (default 1 MiB of canonical JSON).",
        "Send less per call, or open the runtime with a larger `max_params_bytes`.",
    ),
    "limit_exceeded": (
        "A per-connection limit was reached: e.g. more than 16 subscriptions, or more than "
        "256 UI Actions waiting for their outcomes, on one Surface bridge of `lineup dev`.",
        "Unsubscribe what is no longer needed (the Surface SDK already shares one bridge "
        "subscription per kind among all its listeners); wait for outcomes before asking "
        "for more actions.",
    ),
    "call_id_conflict": (
        "A call_id was reused with a different conversation, method or params.",
        "Use a fresh call_id for a new call.",
    ),
    "app_not_running": (
        "The tool acts only on an app that is already running in this conversation.",
        "Start the app with one of its activating tools first.",
    ),
    "unknown_action": (
        "No UI Action of that name: the app (or the build its App session runs) does not "
        "declare it; an Agent tool's name is not an action.",
        "Declare the action with `define_ui_actions` (`@actions.action`), rebuild, and ask "
        "for one of the names `lineup inspect` lists under its UI Actions.",
    ),
    "action_id_conflict": (
        "A UI Action's `client_id` and `seq` were already used in this App session with "
        "another name or params.",
        "Number every new action of a client with the next seq; resend an action only with "
        "the same name and params.",
    ),
    "action_out_of_order": (
        "A UI Action skipped a seq: per App session each client numbers its actions 1, 2, "
        "3… and the runtime accepts only the next one (`details.expected_seq`).",
        "Send the actions of a client in order, each seq after the previous one was "
        "accepted or rejected; nothing was persisted.",
    ),
    "action_pending": (
        "The wait for a UI Action's outcome ran out; the action stays queued and runs in its turn.",
        "Send the same action again (same client_id, seq, name and params) to wait for, or "
        "read, its outcome; or pass a longer `timeout`.",
    ),
    "activation_failed": (
        "The app could not be activated; the call was not run.",
        "See `details.reason`; retry with a new call_id.",
    ),
    "activation_cancelled": (
        "The activation was cancelled; the call was not run.",
        "See `details.reason`; retry with a new call_id if still wanted.",
    ),
    "handler_timeout": (
        "The MiniApp handler did not answer within its timeout.",
        "Retry later; MiniApp authors can raise `timeout_s`.",
    ),
    "handler_failed": (
        "The MiniApp handler raised an unexpected error.",
        "MiniApp authors: see the worker log (`lineup run --verbose`).",
    ),
    "handler_result_invalid": (
        "The handler's result does not match the tool's result schema.",
        "MiniApp authors: return a value matching the declared return type.",
    ),
    "delivery_interrupted": (
        "The call was delivered but its worker stopped before answering.",
        "Check with a read tool whether it took effect before retrying with a new call_id.",
    ),
    "worker_protocol_error": (
        "The MiniApp worker sent a malformed or oversized bridge message.",
        "MiniApp authors: do not write to the bridge; use `print` or the logger.",
    ),
    "session_data_revision_conflict": (
        "Session data changed since the revision the writer expected.",
        "Read the data again and retry with the new revision.",
    ),
    "session_data_write_not_allowed": (
        "A Surface cannot write session data this iteration: only handlers write it.",
        "Change session data from a tool handler (`ctx.session_data.replace`); the Surface reads and subscribes.",
    ),
    "session_data_invalid": (
        "Session data must be a JSON object.",
        "Pass a dict of JSON-compatible values.",
    ),
    "session_data_too_large": (
        "Session data is over 1 MiB of JSON.",
        "Store less per session.",
    ),
    "pomodoro_already_active": (
        "A Pomodoro is already starting or focusing in this conversation.",
        "Interrupt it first with `pomodoro.interrupt`.",
    ),
    # --- containment and trust (SPEC 8, 12) ---
    "sandbox_unavailable": (
        '`sandbox="required"` (or `--sandbox required`) was asked for, and this platform '
        "cannot contain MiniApp code (files, network and process tree).",
        "Run on Linux with Landlock and user namespaces enabled, or use best_effort and "
        "read what `rt.sandbox` / `lineup run -v` report as enforced.",
    ),
    "permission_not_allowed": (
        "The app asks for a permission (`[app.permissions]`) that the trust store does not "
        "allow its signing key to grant.",
        "If you trust the app with it: `lineup trust add KEY --scope SCOPE --allow network`.",
    ),
    "usage_invalid": (
        "An argument or option cannot work as given.",
        "Check the command's or function's documented arguments (`lineup COMMAND --help`).",
    ),
    "key_exists": (
        "`lineup keygen` would overwrite a key that already exists in the --out folder.",
        "Choose another --out folder, or move the old key away first; keys are never overwritten.",
    ),
    # --- simulation (SPEC 5.8) ---
    "scenario_invalid": (
        "A scenario file is malformed; the message names the step.",
        "Fix the named step (see the scenario format reference).",
    ),
    "expectation_failed": (
        "A scenario step's messages did not match its `expect` list.",
        "Compare the expected and actual messages printed for the step.",
    ),
    # --- `lineup serve` (SPEC 10) ---
    "tool_name_too_long": (
        "A tool name would exceed MCP's 64-character limit, so `lineup serve` refuses to start.",
        "Shorten the method name in the MiniApp's declarations.",
    ),
    # --- `lineup serve` for the MCP clients people use (SPEC 13.2) ---
    "call_pending": (
        "The call is still running; `lineup serve` stopped holding the request (`--max-wait`) "
        "so the client's own timeout cannot end it unanswered, or the runtime closed while "
        "`call()` waited for its final answer (the call stays stored and runs once the runtime "
        "is open again).",
        "Call the `lineup-result` tool with the call_id in `details` for its final answer; "
        "from the Python API, the same call (same call_id) once the runtime is open answers it.",
    ),
    "call_not_found": (
        "`lineup-result` was asked for a call_id this conversation never made.",
        "Pass the call_id of an earlier call of the same conversation (its answer's `_meta`).",
    ),
    "scope_reserved": (
        "An installed app uses the scope `lineup`, reserved for the toolchain's own tools, so "
        "`lineup serve` refuses to start.",
        "Rebuild the app with another scope (`lineup build` refuses `lineup` too).",
    ),
    # --- the Surface as an MCP App (SPEC 18.2) ---
    "view_invalid": (
        "An app-only tool (`lineup-surface-sync`, `lineup-ui-action`) got no valid `view`: "
        "missing, not signed by this runtime, expired (24 hours), or of another conversation "
        "than the one its request names.",
        "Reload the View: its host passes a fresh `view` in the `_meta` of the next linked "
        "tool result, and every sync answer carries a refreshed one.",
    ),
}
