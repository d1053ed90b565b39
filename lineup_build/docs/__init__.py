"""`lineup docs`: a reference of a MiniApp's tools, generated from its manifest.

`docs_markdown(manifest)` reads the typed `lineup_build.model.Manifest`, pure and
deterministic (same manifest, same bytes, from a folder or from its bundle); `docs_html`
gives the same page as one HTML document; `write_docs` writes either to a file.
"""

from __future__ import annotations

from lineup_build.docs._html import page_html
from lineup_build.docs._page import docs_markdown
from lineup_build.docs._write import write_docs
from lineup_build.model import Manifest

__all__ = ["docs_html", "docs_markdown", "write_docs"]


def docs_html(manifest: Manifest) -> str:
    """The reference of `manifest` as one self-contained HTML page (deterministic)."""
    return page_html(docs_markdown(manifest))
