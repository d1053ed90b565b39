"""An embedder's marks of calls (`Runtime.mark_call`; `lineup serve` marks the calls that
created MCP tasks), in `call_marks` (schema 6): found by mark and conversation, oldest first,
through `call_marks_conversation`, a page at a time — never every mark ever written. A mark
lives as long as the call it marks (the runtime keeps every accepted call)."""

from __future__ import annotations

from typing import Any

from lineup_runtime_lite.store.connection import SqlConnection

__all__ = ["CallMarks"]


class CallMarks:
    """The facts' reads and writes of call marks (`SqlFacts` has them)."""

    db: SqlConnection

    def add_call_mark(self, mark: str, call_id: str) -> bool:
        """Mark an accepted call (again: nothing changes); False when there is no such call."""
        found = self.db.execute("SELECT 1 FROM calls WHERE call_id=?", (call_id,)).fetchone()
        if found is None:
            return False
        self.db.execute(
            "INSERT INTO call_marks (mark, call_id, conversation_id, created_ms) "
            "SELECT ?, call_id, conversation_id, created_ms FROM calls WHERE call_id=? "
            "ON CONFLICT DO NOTHING",
            (mark, call_id),
        )
        return True

    def call_marked(self, mark: str, call_id: str) -> bool:
        row = self.db.execute(
            "SELECT 1 FROM call_marks WHERE mark=? AND call_id=?", (mark, call_id)
        ).fetchone()
        return row is not None

    def marked_calls(
        self,
        mark: str,
        conversation_id: str | None = None,
        after: str | None = None,
        limit: int | None = None,
    ) -> list[str]:
        """The calls marked `mark` (of one conversation), oldest first; with `after`, those
        after that marked call; at most `limit`: through the index, never every mark."""
        where = "mark=?"
        args: list[Any] = [mark]
        if conversation_id is not None:
            where += " AND conversation_id=?"
            args.append(conversation_id)
        if after is not None:
            where += (
                " AND (created_ms, call_id) > (SELECT created_ms, call_id FROM call_marks "
                "WHERE mark=? AND call_id=?)"
            )
            args += [mark, after]
        sql = f"SELECT call_id FROM call_marks WHERE {where} ORDER BY created_ms, call_id"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [str(r[0]) for r in self.db.execute(sql, tuple(args)).fetchall()]
