"""`lineup docs`: a Markdown reference of a MiniApp's tools, generated from its manifest.

`docs_markdown(manifest)` reads the typed `lineup_build.model.Manifest`, pure and
deterministic (same manifest, same bytes, from a folder or from its bundle); `write_docs`
writes it to a file.
"""

from __future__ import annotations

from lineup_build.docs._page import docs_markdown
from lineup_build.docs._write import write_docs

__all__ = ["docs_markdown", "write_docs"]
