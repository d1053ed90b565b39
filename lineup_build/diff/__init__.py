"""`lineup diff`: a breaking-change gate for Agent tools (SPEC 11).

`diff_manifests(old, new)` compares two manifests as an Agent written against OLD would
meet NEW and returns a `DiffReport`: every change with its tool, a JSON pointer into the
resolved schema, a kind naming the rule and whether it breaks, plus the version verdict
(`report.ok` is False exactly when a breaking change comes without a major bump). Pure
functions over the typed `lineup_build.model.Manifest` (its schemas stay JSON data);
loading bundles and folders into that model is `lineup_build.sources`, rendering is the
CLI's.

Modules: `_rules` (which kind breaks on which side), `_branches` (unions as per-type
alternatives), `_schema` (the schema walk), `_manifest` (tools, app, versions),
`_report` (the report and the gate).
"""

from __future__ import annotations

from lineup_build.diff._manifest import diff_manifests
from lineup_build.diff._report import Change, DiffReport, field_name
from lineup_build.diff._rules import INPUT, RESULT, RULES
from lineup_build.diff._schema import SchemaChange, compare_schemas

__all__ = [
    "INPUT",
    "RESULT",
    "RULES",
    "Change",
    "DiffReport",
    "SchemaChange",
    "compare_schemas",
    "diff_manifests",
    "field_name",
]
