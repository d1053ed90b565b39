"""One failing fixture app per build diagnostic code, each asserting the code and where.

Every case is a small MiniApp written to disk and checked through `check_project` (the
real import subprocess). Locations are named by `# <-marker` comments in the fixture
source, so each assertion reads as "this code, at that line".
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lineup_build.build import build_project, check_project
from lineup_build.diagnostics import Diagnostic, Where
from lineup_build.signing import private_pem

TOOLS = "demo_app/tools.py"
TOML = "lineup.toml"

PEM_KEY = (
    "-----BEGIN PRIVATE KEY-----\n"
    "MC4CAQAwBQYDK2VwBCIEIAABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f\n"
    "-----END PRIVATE KEY-----\n"
)


def declared(
    method: str,
    input_schema: object = None,
    result_schema: object = None,
    *,
    marker: str = "<-decl",
) -> str:
    """A schema-first tool (`declare` + a dict handler) with the given schemas."""
    if input_schema is None:
        input_schema = {"type": "object", "properties": {}}
    if result_schema is None:
        result_schema = {"type": "object"}
    fn = method.replace(".", "_")
    return (
        f"\ntools.declare({method!r}, input_schema={input_schema!r}, "
        f'result_schema={result_schema!r}, activation="app_ready", description="d")  # {marker}\n'
        f"\n@tools.handler({method!r})  # {marker}-handler\n"
        f"def {fn}(ctx: ToolContext, params: dict[str, Any]) -> dict[str, Any]:\n"
        f"    return params\n"
    )


def tool(method: str, *, marker: str = "<-tool", activation: str = "app_ready") -> str:
    """A decorated tool with one described keyword parameter."""
    fn = method.replace(".", "_")
    return (
        f"\n@tools.tool({method!r}, activation={activation!r})  # {marker}\n"
        f"def {fn}(ctx: ToolContext, x: Annotated[int, Field(description='x')]) -> int:\n"
        f'    """Return x."""\n'
        f"    return x\n"
    )


@dataclass
class Case:
    """A fixture app that must fail with `code` at `at` (and `also`, for two places)."""

    id: str
    code: str
    body: str | None = ""
    at: tuple[str, str | int | None] = (TOOLS, "<-")
    also: tuple[str, str | int | None] | None = None
    files: dict[str, str] = field(default_factory=dict)
    toml: dict[str, Any] = field(default_factory=dict)
    lineup_toml: str | None = None
    setup: Callable[[Path], None] | None = None
    message: str | None = None
    not_in_message: str | None = None


def _symlink_file(root: Path) -> None:
    os.symlink(root / "demo_app/tools.py", root / "demo_app/alias.py")


def _symlink_dir(root: Path) -> None:
    (root / "elsewhere").mkdir()
    (root / "elsewhere/extra.py").write_text("X = 1\n")
    os.symlink(root / "elsewhere", root / "demo_app/linked")


def _fifo(root: Path) -> None:
    os.mkfifo(root / "demo_app/pipe.py")


def _remove_toml(root: Path) -> None:
    (root / TOML).unlink()


POMODORO = {"scope": "pomodoro"}
RUNTIME_START = (
    '\ntools.runtime_tool("pomodoro.start", handler_key="pomodoro.start", '
    'activation="{activation}"{extra})  # <-runtime\n'
)

CASES = [
    # --- config_invalid ------------------------------------------------------------------
    Case("config_invalid-missing_file", "config_invalid", at=(TOML, None), setup=_remove_toml),
    Case(
        "config_invalid-bad_toml",
        "config_invalid",
        lineup_toml='[app\nscope = "demo"\n',
        at=(TOML, "[app"),
        message="not valid TOML",
    ),
    Case(
        "config_invalid-bad_version",
        "config_invalid",
        toml={"version": "1.0"},
        at=(TOML, "version ="),
        message="app.version",
    ),
    Case(
        "config_invalid-unknown_key",
        "config_invalid",
        toml={"extra": 'colour = "red"\n'},
        at=(TOML, "colour"),
        message="app.colour",
    ),
    Case(
        "config_invalid-missing_field",
        "config_invalid",
        lineup_toml='[app]\nscope = "demo"\nname = "Demo"\nversion = "1.0.0"\ninclude = ["demo_app/**/*.py"]\n',
        at=(TOML, "[app]"),
        message="app.entry is missing",
    ),
    Case(
        "config_invalid-bad_scope",
        "config_invalid",
        toml={"scope": "Demo-App"},
        at=(TOML, "scope ="),
    ),
    Case(
        "config_invalid-bad_activation",
        "config_invalid",
        body=tool("demo.add", activation="sometimes", marker="<-act"),
        at=(TOOLS, "<-act"),
        message="sometimes",
    ),
    Case(
        "config_invalid-registry_scope_differs",
        "config_invalid",
        body=None,
        files={
            TOOLS: "from lineup_sdk import define_agent_tools\n\n"
            'tools = define_agent_tools(app_scope="demo")  # <-registry\n'
        },
        toml={"scope": "other"},
        at=(TOOLS, "<-registry"),
        also=(TOML, "scope ="),
    ),
    Case(
        "config_invalid-timeout",
        "config_invalid",
        body=(
            '\n@tools.tool("demo.slow", activation="app_ready", timeout_s=0)  # <-slow\n'
            'def slow(ctx: ToolContext) -> None:\n    """Slow."""\n'
        ),
        at=(TOOLS, "<-slow"),
        message="timeout_s",
    ),
    # --- entry_import_failed -------------------------------------------------------------
    Case(
        "entry_import_failed-module_not_included",
        "entry_import_failed",
        body="\nfrom demo_app import helpers  # <-import\n",
        files={"demo_app/helpers.py": "X = 1\n"},
        toml={"include": ("demo_app/tools.py", "demo_app/__init__.py")},
        at=(TOOLS, "<-import"),
        message="cannot import name 'helpers'",
    ),
    Case(
        "entry_import_failed-exception_at_import",
        "entry_import_failed",
        body='\nraise RuntimeError("boom at import")  # <-raise\n',
        at=(TOOLS, "<-raise"),
        message="RuntimeError: boom at import",
        not_in_message="Traceback",
    ),
    Case(
        "entry_import_failed-syntax_error",
        "entry_import_failed",
        body="\ndef broken(:  # <-syntax\n    pass\n",
        at=(TOOLS, "<-syntax"),
        message="SyntaxError",
        not_in_message="lineup-stage",  # no staging paths in what the author reads
    ),
    Case(
        "entry_import_failed-syntax_error_in_imported_module",
        "entry_import_failed",
        body="\nfrom demo_app import helpers\n",
        files={"demo_app/helpers.py": "X = 1\nY = (  # <-broken\n"},
        at=("demo_app/helpers.py", "<-broken"),
    ),
    Case(
        "entry_import_failed-entry_not_in_bundle",
        "entry_import_failed",
        toml={"entry": "demo_app.missing"},
        at=(TOML, "entry ="),
        message="demo_app.missing",
    ),
    # --- registry_missing / registry_multiple -------------------------------------------
    Case(
        "registry_missing",
        "registry_missing",
        body=None,
        files={TOOLS: '"""No registry here."""\nX = 1\n'},
        at=(TOOLS, 1),
    ),
    Case(
        "registry_multiple",
        "registry_multiple",
        body='\nsecond = define_agent_tools(app_scope="demo")  # <-second\n',
        at=(TOOLS, "<-second"),
        also=(TOOLS, "<-registry"),
    ),
    # --- method names --------------------------------------------------------------------
    Case(
        "invalid_method_name-uppercase",
        "invalid_method_name",
        body=tool("demo.Add"),
        at=(TOOLS, "<-tool"),
    ),
    Case(
        "invalid_method_name-one_segment",
        "invalid_method_name",
        body=tool("demo"),
        at=(TOOLS, "<-tool"),
    ),
    Case(
        "method_outside_scope",
        "method_outside_scope",
        body=tool("other.add"),
        at=(TOOLS, "<-tool"),
    ),
    # --- duplicate_method (both places) ---------------------------------------------------
    Case(
        "duplicate_method-tool_and_tool",
        "duplicate_method",
        body=tool("demo.add", marker="<-first") + tool("demo.add", marker="<-second"),
        at=(TOOLS, "<-second"),
        also=(TOOLS, "<-first"),
    ),
    Case(
        "duplicate_method-tool_and_declare",
        "duplicate_method",
        body=tool("demo.add", marker="<-first") + declared("demo.add", marker="<-second"),
        at=(TOOLS, "<-second"),
        also=(TOOLS, "<-first"),
    ),
    Case(
        "duplicate_method-declare_and_runtime_tool",
        "duplicate_method",
        body=declared("pomodoro.start", marker="<-first")
        + RUNTIME_START.format(activation="foreground_required", extra="").replace(
            "<-runtime", "<-second"
        ),
        toml=POMODORO,
        at=(TOOLS, "<-second"),
        also=(TOOLS, "<-first"),
    ),
    Case(
        "duplicate_method-runtime_tool_and_tool",
        "duplicate_method",
        body=RUNTIME_START.format(activation="foreground_required", extra="").replace(
            "<-runtime", "<-first"
        )
        + tool("pomodoro.start", marker="<-second"),
        toml=POMODORO,
        at=(TOOLS, "<-second"),
        also=(TOOLS, "<-first"),
    ),
    Case(
        "duplicate_method-two_handlers",
        "duplicate_method",
        body=declared("demo.add", marker="<-decl")
        + (
            '\n@tools.handler("demo.add")  # <-second\n'
            "def again(ctx: ToolContext, params: dict[str, Any]) -> dict[str, Any]:\n"
            "    return params\n"
        ),
        at=(TOOLS, "<-second"),
        also=(TOOLS, "<-decl-handler"),
    ),
    # --- handlers --------------------------------------------------------------------------
    Case(
        "missing_handler",
        "missing_handler",
        body=(
            '\ntools.declare("demo.add", input_schema={"type": "object"}, '
            'result_schema={"type": "object"}, activation="app_ready")  # <-decl\n'
        ),
        at=(TOOLS, "<-decl"),
    ),
    Case(
        "handler_without_declaration-undeclared",
        "handler_without_declaration",
        body=(
            '\n@tools.handler("demo.ghost")  # <-handler\n'
            "def ghost(ctx: ToolContext, params: dict[str, Any]) -> dict[str, Any]:\n"
            "    return params\n"
        ),
        at=(TOOLS, "<-handler"),
    ),
    Case(
        "handler_without_declaration-runtime_tool",
        "handler_without_declaration",
        body=RUNTIME_START.format(activation="foreground_required", extra="")
        + (
            '\n@tools.handler("pomodoro.start")  # <-handler\n'
            "def start(ctx: ToolContext, params: dict[str, Any]) -> dict[str, Any]:\n"
            "    return params\n"
        ),
        toml=POMODORO,
        at=(TOOLS, "<-handler"),
        also=(TOOLS, "<-runtime"),
    ),
    # --- handler_signature_mismatch --------------------------------------------------------
    Case(
        "handler_signature_mismatch-kwargs_vs_declared_properties",
        "handler_signature_mismatch",
        body=(
            '\ntools.declare("demo.add", input_schema={"type": "object", "properties": '
            '{"title": {"type": "string"}, "count": {"type": "integer"}}, "required": ["title"]}, '
            'result_schema={"type": "integer"}, activation="app_ready")  # <-decl\n'
            '\n@tools.handler("demo.add")  # <-handler\n'
            "def add(ctx: ToolContext, title: str, size: int = 1) -> int:\n"
            "    return size\n"
        ),
        at=(TOOLS, "<-handler"),
        also=(TOOLS, "<-decl"),
        message="size",
    ),
    Case(
        "handler_signature_mismatch-model_vs_declared",
        "handler_signature_mismatch",
        body=(
            "\nclass AddParams(BaseModel):\n    count: int\n"
            '\ntools.declare("demo.add", input_schema={"type": "object", "properties": '
            '{"count": {"type": "string"}}, "required": ["count"], "additionalProperties": False}, '
            'result_schema={"type": "integer"}, activation="app_ready")  # <-decl\n'
            '\n@tools.handler("demo.add")  # <-handler\n'
            "def add(ctx: ToolContext, params: AddParams) -> int:\n"
            "    return params.count\n"
        ),
        at=(TOOLS, "<-handler"),
        also=(TOOLS, "<-decl"),
        message="AddParams",
    ),
    Case(
        # a property named `title` is a name, not an annotation to strip before comparing
        "handler_signature_mismatch-model_property_named_title",
        "handler_signature_mismatch",
        body=(
            "\nclass AddParams(BaseModel):\n    title: int\n"
            '\ntools.declare("demo.add", input_schema={"type": "object", "properties": '
            '{"title": {"type": "string"}}, "required": ["title"], "additionalProperties": False}, '
            'result_schema={"type": "integer"}, activation="app_ready")  # <-decl\n'
            '\n@tools.handler("demo.add")  # <-handler\n'
            "def add(ctx: ToolContext, params: AddParams) -> int:\n"
            "    return 1\n"
        ),
        at=(TOOLS, "<-handler"),
        also=(TOOLS, "<-decl"),
    ),
    Case(
        "handler_signature_mismatch-result_model_vs_declared",
        "handler_signature_mismatch",
        body=(
            "\nclass Out(BaseModel):\n    id: str\n"
            '\ntools.declare("demo.add", input_schema={"type": "object", "properties": {}}, '
            'result_schema={"type": "object", "properties": {"id": {"type": "integer"}}}, '
            'activation="app_ready")  # <-decl\n'
            '\n@tools.handler("demo.add")  # <-handler\n'
            "def add(ctx: ToolContext, params: dict[str, Any]) -> Out:\n"
            '    return Out(id="x")\n'
        ),
        at=(TOOLS, "<-handler"),
        also=(TOOLS, "<-decl"),
        message="return annotation Out",
    ),
    Case(
        "handler_signature_mismatch-no_ctx_parameter",
        "handler_signature_mismatch",
        body=(
            '\n@tools.tool("demo.add", activation="app_ready")  # <-tool\n'
            'def add() -> int:\n    """Add."""\n    return 1\n'
        ),
        at=(TOOLS, "<-tool"),
        message="ToolContext",
    ),
    Case(
        "handler_signature_mismatch-ctx_keyword_only",
        "handler_signature_mismatch",
        body=(
            '\n@tools.tool("demo.add", activation="app_ready")  # <-tool\n'
            'def add(*, ctx: ToolContext) -> int:\n    """Add."""\n    return 1\n'
        ),
        at=(TOOLS, "<-tool"),
    ),
    Case(
        "handler_signature_mismatch-no_return_annotation",
        "handler_signature_mismatch",
        body=(
            '\n@tools.tool("demo.add", activation="app_ready")  # <-tool\n'
            'async def add(ctx: ToolContext, x: int):\n    """Add."""\n    return x\n'
        ),
        at=(TOOLS, "<-tool"),
        message="return annotation",
    ),
    Case(
        "handler_signature_mismatch-var_kwargs",
        "handler_signature_mismatch",
        body=(
            '\n@tools.tool("demo.add", activation="app_ready")  # <-tool\n'
            'def add(ctx: ToolContext, **kw: int) -> int:\n    """Add."""\n    return 1\n'
        ),
        at=(TOOLS, "<-tool"),
        message="**kwargs",
    ),
    Case(
        "handler_signature_mismatch-unannotated_parameter",
        "handler_signature_mismatch",
        body=(
            '\n@tools.tool("demo.add", activation="app_ready")  # <-tool\n'
            'def add(ctx: ToolContext, x) -> int:\n    """Add."""\n    return 1\n'
        ),
        at=(TOOLS, "<-tool"),
        message="'x'",
    ),
    Case(
        "handler_signature_mismatch-plain_dict_on_decorated_tool",
        "handler_signature_mismatch",
        body=(
            '\n@tools.tool("demo.add", activation="app_ready")  # <-tool\n'
            'def add(ctx: ToolContext, params: dict[str, Any]) -> int:\n    """Add."""\n'
            "    return 1\n"
        ),
        at=(TOOLS, "<-tool"),
        message="tools.declare",
    ),
    # --- invalid_input_schema ----------------------------------------------------------------
    Case(
        "invalid_input_schema-not_object",
        "invalid_input_schema",
        body=declared("demo.add", {"type": "array"}),
        at=(TOOLS, "<-decl"),
        message='"type": "object"',
    ),
    *(
        Case(
            f"invalid_input_schema-forbidden_{name}",
            "invalid_input_schema",
            body=declared("demo.add", {"type": "object", "properties": {"a": sub}}),
            at=(TOOLS, "<-decl"),
            message=keyword,
        )
        for name, keyword, sub in (
            ("id", "$id", {"$id": "urn:x", "type": "string"}),
            ("dynamic_ref", "$dynamicRef", {"$dynamicRef": "#node"}),
            ("dynamic_anchor", "$dynamicAnchor", {"$dynamicAnchor": "node"}),
            ("recursive_ref", "$recursiveRef", {"$recursiveRef": "#"}),
            ("vocabulary", "$vocabulary", {"$vocabulary": {}}),
            (
                "schema_draft_07",
                "$schema",
                {"$schema": "http://json-schema.org/draft-07/schema#"},
            ),
        )
    ),
    Case(
        "invalid_input_schema-metaschema_min_length_negative",
        "invalid_input_schema",
        body=declared(
            "demo.add", {"type": "object", "properties": {"a": {"type": "string", "minLength": -1}}}
        ),
        at=(TOOLS, "<-decl"),
        message="minLength",
    ),
    Case(
        "invalid_input_schema-metaschema_unknown_type",
        "invalid_input_schema",
        body=declared("demo.add", {"type": "object", "properties": {"a": {"type": "foo"}}}),
        at=(TOOLS, "<-decl"),
        message="foo",
    ),
    Case(
        # a keyword the structural walk leaves to the 2020-12 metaschema
        "invalid_input_schema-metaschema_dependent_required",
        "invalid_input_schema",
        body=declared("demo.add", {"type": "object", "dependentRequired": {"a": "b"}}),
        at=(TOOLS, "<-decl"),
        message="2020-12",
    ),
    Case(
        "invalid_input_schema-pattern_backreference",
        "invalid_input_schema",
        body=declared(
            "demo.add",
            {"type": "object", "properties": {"a": {"type": "string", "pattern": "(a)\\1"}}},
        ),
        at=(TOOLS, "<-decl"),
        message="linear-time",
    ),
    Case(
        "invalid_input_schema-pattern_lookahead",
        "invalid_input_schema",
        body=declared(
            "demo.add",
            {
                "type": "object",
                "patternProperties": {"^(?=x)": {"type": "string"}},
            },
        ),
        at=(TOOLS, "<-decl"),
        message="linear-time",
    ),
    Case(
        "invalid_input_schema-not_json",
        "invalid_input_schema",
        body=declared(
            "demo.add", {"type": "object", "properties": {"a": {"type": "number"}}}
        ).replace("'number'}", "'number', 'default': float('nan')}"),
        at=(TOOLS, "<-decl"),
        message="JSON",
    ),
    # --- invalid_result_schema ----------------------------------------------------------------
    Case(
        "invalid_result_schema-unknown_type",
        "invalid_result_schema",
        body=declared("demo.add", result_schema={"type": "foo"}),
        at=(TOOLS, "<-decl"),
    ),
    Case(
        "invalid_result_schema-forbidden_id",
        "invalid_result_schema",
        body=declared("demo.add", result_schema={"$id": "https://example.com/r"}),
        at=(TOOLS, "<-decl"),
        message="$id",
    ),
    Case(
        "invalid_result_schema-pattern_lookbehind",
        "invalid_result_schema",
        body=declared("demo.add", result_schema={"type": "string", "pattern": "(?<=a)b"}),
        at=(TOOLS, "<-decl"),
    ),
    # --- remote_ref -------------------------------------------------------------------------------
    Case(
        "remote_ref-http_in_input",
        "remote_ref",
        body=declared(
            "demo.add",
            {"type": "object", "properties": {"a": {"$ref": "https://example.com/a.json"}}},
        ),
        at=(TOOLS, "<-decl"),
        message="https://example.com/a.json",
    ),
    Case(
        "remote_ref-relative_file_in_input",
        "remote_ref",
        body=declared(
            "demo.add", {"type": "object", "properties": {"a": {"$ref": "defs.json#/a"}}}
        ),
        at=(TOOLS, "<-decl"),
        message="defs.json",
    ),
    Case(
        "remote_ref-http_in_result",
        "remote_ref",
        body=declared("demo.add", result_schema={"$ref": "http://example.com/r.json"}),
        at=(TOOLS, "<-decl"),
        message="result_schema",
    ),
    # --- runtime tools ----------------------------------------------------------------------------
    Case(
        "unknown_runtime_handler",
        "unknown_runtime_handler",
        body=(
            '\ntools.runtime_tool("pomodoro.snooze", handler_key="pomodoro.snooze", '
            'activation="app_ready")  # <-runtime\n'
        ),
        toml=POMODORO,
        at=(TOOLS, "<-runtime"),
        message="pomodoro.snooze",
    ),
    Case(
        "runtime_contract_mismatch-wrong_activation",
        "runtime_contract_mismatch",
        body=RUNTIME_START.format(activation="app_ready", extra=""),
        toml=POMODORO,
        at=(TOOLS, "<-runtime"),
        message="activation",
    ),
    Case(
        "runtime_contract_mismatch-custom_input_schema",
        "runtime_contract_mismatch",
        body=RUNTIME_START.format(
            activation="foreground_required",
            extra=', input_schema={"type": "object", "properties": {}}',
        ),
        toml=POMODORO,
        at=(TOOLS, "<-runtime"),
        message="input_schema",
    ),
    Case(
        "runtime_contract_mismatch-custom_result_schema",
        "runtime_contract_mismatch",
        body=RUNTIME_START.format(
            activation="foreground_required", extra=', result_schema={"type": "object"}'
        ),
        toml=POMODORO,
        at=(TOOLS, "<-runtime"),
        message="result_schema",
    ),
    Case(
        "runtime_contract_mismatch-key_of_another_scope",
        "runtime_contract_mismatch",
        body=(
            '\ntools.runtime_tool("demo.focus", handler_key="pomodoro.start", '
            'activation="foreground_required")  # <-runtime\n'
        ),
        at=(TOOLS, "<-runtime"),
        message="'pomodoro'",
    ),
    # --- included files ---------------------------------------------------------------------------
    Case(
        "include_unsafe-symlinked_file",
        "include_unsafe",
        setup=_symlink_file,
        at=("demo_app/alias.py", None),
        message="symlink",
    ),
    Case(
        "include_unsafe-symlinked_folder",
        "include_unsafe",
        setup=_symlink_dir,
        at=("demo_app/linked", None),
        message="symlink",
    ),
    Case(
        "include_unsafe-glob_escapes_project",
        "include_unsafe",
        toml={"include": ("demo_app/**/*.py", "../outside/*.py")},
        at=(TOML, "include ="),
        message="../outside",
    ),
    Case(
        "include_unsafe-absolute_glob",
        "include_unsafe",
        toml={"include": ("demo_app/**/*.py", "/etc/*.conf")},
        at=(TOML, "include ="),
    ),
    Case(
        "include_unsafe-not_a_regular_file",
        "include_unsafe",
        setup=_fifo,
        at=("demo_app/pipe.py", None),
        message="not a regular file",
    ),
    Case(
        "include_unsafe-names_differ_only_by_case",
        "include_unsafe",
        files={"demo_app/Util.py": "", "demo_app/util.py": ""},
        at=("demo_app/util.py", None),
        also=("demo_app/Util.py", None),
    ),
    Case(
        "include_secret-pem_file",
        "include_secret",
        files={"demo_app/signing.pem": PEM_KEY},
        toml={"include": ("demo_app/**",)},
        at=("demo_app/signing.pem", None),
    ),
    Case(
        "include_secret-pem_inside_python",
        "include_secret",
        files={"demo_app/keys.py": f"KEY = '''{PEM_KEY}'''\n"},
        at=("demo_app/keys.py", None),
    ),
]


def _where(app: Any, spec: tuple[str, str | int | None]) -> Where:
    file, mark = spec
    if isinstance(mark, str):
        return Where(file, app.line(mark, file))
    return Where(file, mark)


def _show(diags: list[Diagnostic]) -> str:
    return "\n".join(json.dumps(d.to_dict(), sort_keys=True) for d in diags)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_each_code_is_reported_at_its_declaration(case: Case, make_app: Any) -> None:
    app = make_app(case.body, files=case.files, lineup_toml=case.lineup_toml, **case.toml)
    if case.setup:
        case.setup(app.root)
    result = check_project(app.root)

    assert not result.ok()
    want = _where(app, case.at)
    also = () if case.also is None else (_where(app, case.also),)
    hits = [d for d in result.diagnostics if d.code == case.code and d.where == want]
    assert hits, f"no {case.code} at {want}; got:\n{_show(result.diagnostics)}"
    hit = hits[0]
    assert hit.severity == "error"
    if case.also is not None:
        assert hit.related == also, _show(hits)
    if case.message:
        assert case.message in hit.message, _show(hits)
    if case.not_in_message:
        assert case.not_in_message not in hit.message
    assert hit.effective_hint  # every error says how to fix it


def test_every_build_code_has_a_fixture_app() -> None:
    covered = {c.code for c in CASES}
    section_2 = {
        "config_invalid",
        "entry_import_failed",
        "registry_missing",
        "registry_multiple",
        "invalid_method_name",
        "method_outside_scope",
        "duplicate_method",
        "missing_handler",
        "handler_without_declaration",
        "handler_signature_mismatch",
        "invalid_input_schema",
        "invalid_result_schema",
        "remote_ref",
        "unknown_runtime_handler",
        "runtime_contract_mismatch",
        "include_unsafe",
        "include_secret",
    }
    # signing_key_missing / signing_key_invalid: test_signing_key_* below
    assert section_2 <= covered


# --- signing keys --------------------------------------------------------------------------


@pytest.fixture
def clean_app(make_app: Any) -> Any:
    return make_app(tool("demo.add"))


def test_signing_key_missing_is_reported_beside_the_rest(make_app: Any) -> None:
    app = make_app(tool("demo.Bad"))
    result = build_project(app.root)

    codes = {d.code for d in result.diagnostics}
    assert {"signing_key_missing", "invalid_method_name"} <= codes
    missing = next(d for d in result.diagnostics if d.code == "signing_key_missing")
    assert missing.where is None  # not a place in the project: the message says what to pass
    assert "--dev-key" in missing.message and "LINEUP_SIGNING_KEY" in missing.message
    assert "lineup keygen" in (missing.effective_hint or "")
    assert not result.ok and result.bundle is None
    assert not (app.root / "dist").exists()


def _ec_pem() -> bytes:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@pytest.mark.parametrize(
    ("variant", "pem", "passphrase", "message"),
    [
        (
            "garbage_pem",
            b"-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n",
            None,
            "PEM",
        ),
        ("not_pem_at_all", b"\x00\x01 binary", None, "PEM"),
        ("wrong_passphrase", "encrypted", "wrong", "passphrase"),
        ("encrypted_without_passphrase", "encrypted", None, "encrypted"),
        ("not_ed25519", "ec", None, "not an Ed25519 key"),
        ("missing_file", None, None, "cannot read"),
    ],
)
def test_signing_key_invalid(
    variant: str,
    pem: Any,
    passphrase: str | None,
    message: str,
    clean_app: Any,
    signing_key: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key_file = tmp_path / "key.pem"
    if pem == "encrypted":
        key_file.write_bytes(private_pem(signing_key, b"right passphrase"))
    elif pem == "ec":
        key_file.write_bytes(_ec_pem())
    elif pem is not None:
        key_file.write_bytes(pem)
    if passphrase is not None:
        monkeypatch.setenv("LINEUP_SIGNING_KEY_PASSPHRASE", passphrase)

    result = build_project(clean_app.root, key_file=key_file)

    assert [d.code for d in result.diagnostics] == ["signing_key_invalid"]
    diag = result.diagnostics[0]
    assert str(key_file) in diag.message  # the location of a key problem is its source
    assert message.lower() in diag.message.lower() or message in (diag.hint or "")
    assert not result.ok and not (clean_app.root / "dist").exists()


def test_signing_key_invalid_from_environment(
    clean_app: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LINEUP_SIGNING_KEY", "not a key")
    result = build_project(clean_app.root)
    assert [d.code for d in result.diagnostics] == ["signing_key_invalid"]
    assert "LINEUP_SIGNING_KEY" in result.diagnostics[0].message


def test_encrypted_key_with_the_right_passphrase_signs(
    clean_app: Any, signing_key: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_file = tmp_path / "key.pem"
    key_file.write_bytes(private_pem(signing_key, b"right passphrase"))
    monkeypatch.setenv("LINEUP_SIGNING_KEY_PASSPHRASE", "right passphrase")
    result = build_project(clean_app.root, key_file=key_file)
    assert result.ok, result.diagnostics
    assert result.key_id == signing_key.key_id


# --- many mistakes, one run ------------------------------------------------------------------

MANY_MISTAKES = (
    tool("demo.Bad", marker="<-bad-name")
    + tool("elsewhere.add", marker="<-outside")
    + tool("demo.add", marker="<-first")
    + tool("demo.add", marker="<-second")
    + declared("demo.schema", {"type": "array"}, marker="<-not-object")
    + declared(
        "demo.remote",
        {"type": "object", "properties": {"a": {"$ref": "https://x.test/a"}}},
        marker="<-remote",
    )
    + '\ntools.declare("demo.nohandler", input_schema={"type": "object"}, '
    'result_schema={"type": "object"}, activation="app_ready")  # <-no-handler\n'
    + '\n@tools.handler("demo.ghost")  # <-ghost\n'
    "def ghost(ctx: ToolContext, params: dict[str, Any]) -> dict[str, Any]:\n"
    "    return params\n"
    + '\ntools.runtime_tool("demo.nap", handler_key="demo.nap", activation="app_ready")  # <-unknown\n'
    + '\nsecond = define_agent_tools(app_scope="demo")  # <-second-registry\n'
)


def test_one_run_reports_every_mistake_and_writes_nothing(
    make_app: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from lineup_build.cli import main

    app = make_app(
        MANY_MISTAKES,
        files={"demo_app/secret.pem": PEM_KEY},
        include=("demo_app/**",),
    )
    with pytest.raises(SystemExit) as exit_info:
        main(["build", str(app.root), "--dev-key", "--json"])

    assert exit_info.value.code == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and doc["bundle"] is None
    found = {(d["code"], d["file"], d["line"]) for d in doc["diagnostics"]}
    expected = {
        ("invalid_method_name", TOOLS, app.line("<-bad-name")),
        ("method_outside_scope", TOOLS, app.line("<-outside")),
        ("duplicate_method", TOOLS, app.line("<-second")),
        ("invalid_input_schema", TOOLS, app.line("<-not-object")),
        ("remote_ref", TOOLS, app.line("<-remote")),
        ("missing_handler", TOOLS, app.line("<-no-handler")),
        ("handler_without_declaration", TOOLS, app.line("<-ghost")),
        ("unknown_runtime_handler", TOOLS, app.line("<-unknown")),
        ("registry_multiple", TOOLS, app.line("<-second-registry")),
        ("include_secret", "demo_app/secret.pem", None),
    }
    assert expected <= found, sorted(found)
    for d in doc["diagnostics"]:
        assert set(d) == {"code", "severity", "message", "file", "line", "related", "hint"}
    assert not (app.root / "dist").exists()
    leftovers = [p for p in app.root.rglob("*") if p.suffix in (".lineup", ".part")]
    assert not [p for p in leftovers if p.is_file()]


def test_check_cli_prints_file_line_code_and_hint(
    make_app: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from lineup_build.cli import main

    app = make_app(tool("demo.add", marker="<-first") + tool("demo.add", marker="<-second"))
    with pytest.raises(SystemExit) as exit_info:
        main(["check", str(app.root)])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    first, second = app.line("<-first"), app.line("<-second")
    assert f"{TOOLS}:{second}: error duplicate_method" in err
    assert f"also at {TOOLS}:{first}" in err
    assert "hint:" in err


# --- warnings --------------------------------------------------------------------------------

UNDESCRIBED = """
@tools.tool("demo.add", activation="app_ready")  # <-tool
def add(ctx: ToolContext, x: int) -> int:
    return x
"""

LARGE = declared(
    "demo.big",
    {"type": "object", "properties": {"v": {"enum": [f"value-{i:05d}" for i in range(6000)]}}},
) + tool("demo.add")


@pytest.mark.parametrize(
    ("body", "code", "count"),
    [(UNDESCRIBED, "missing_description", 2), (LARGE, "large_schema", 1)],
    ids=["missing_description", "large_schema"],
)
def test_warnings_pass_normally_and_fail_with_strict(
    body: str, code: str, count: int, make_app: Any, signing_key: Any
) -> None:
    app = make_app(body)
    lenient = build_project(app.root, signing_key=signing_key)
    assert lenient.ok, _show(lenient.diagnostics)
    warnings = [d for d in lenient.diagnostics if d.code == code]
    assert len(warnings) == count
    assert all(d.severity == "warning" for d in lenient.diagnostics)
    assert all(d.where is not None and d.where.file == TOOLS for d in warnings)
    assert lenient.bundle is not None and lenient.bundle.exists()
    lenient.bundle.unlink()

    strict = build_project(app.root, signing_key=signing_key, strict=True)
    assert not strict.ok and strict.bundle is None
    assert not list((app.root / "dist").iterdir())
    assert not check_project(app.root).ok(strict=True)


# --- what never goes into a bundle --------------------------------------------------------------


def test_generated_and_private_folders_are_never_included(make_app: Any, signing_key: Any) -> None:
    app = make_app(
        tool("demo.add"),
        files={
            "demo_app/__pycache__/tools.cpython-311.pyc": "",
            "demo_app/stale.pyc": "",
            "dist/old.lineup": "",
            ".lineup/dev-key.pub.pem": "",
            ".git/config": "",
            "out/leftover.txt": "",
            "notes/readme.txt": "",
        },
        include=("**",),
    )
    result = build_project(app.root, signing_key=signing_key, out_dir=app.root / "out")
    assert result.ok, _show(result.diagnostics)
    assert [f.path for f in result.check.files] == [
        "demo_app/__init__.py",
        "demo_app/tools.py",
        "lineup.toml",
        "notes/readme.txt",
    ]
