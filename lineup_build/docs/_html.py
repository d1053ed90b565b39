"""`lineup docs --format html`: the Markdown page as one self-contained HTML page.

It converts exactly the Markdown `docs_markdown` writes (headings, paragraphs, `- ` lists
with a bold label, pipe tables, fenced blocks, code spans, `#anchor` links), no more: no
Markdown library, and nothing from the manifest can become markup. Text outside code
spans arrives escaped already (`_text.html`); code spans and fenced blocks are escaped
here. Deterministic, like the Markdown.
"""

from __future__ import annotations

import re

__all__ = ["page_html"]

_STYLE = """
body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1b1b1b}
h1,h2,h3{line-height:1.25}h2{border-top:1px solid #ddd;padding-top:1rem;margin-top:2rem}
code{font:13px ui-monospace,monospace;background:#f3f3f3;padding:0 .2em;border-radius:3px}
pre{background:#f6f6f6;padding:.6rem .8rem;overflow-x:auto;border-radius:4px}
pre code{background:none;padding:0}
table{border-collapse:collapse;margin:.5rem 0}th,td{border:1px solid #ddd;padding:.25rem .5rem;
text-align:left;vertical-align:top}th{background:#f6f6f6}
""".strip()

_CODE = re.compile(r"(`+)(.+?)\1")
_LINK = re.compile(r"\[(.+?)\]\((#[a-z0-9_-]*)\)")
_LABEL = re.compile(r"\A\*\*([^*]+)\*\*")


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _inline(text: str) -> str:
    """One line of page text: code spans escaped here, the rest already escaped."""
    if "`" not in text:
        return _plain(text)
    out: list[str] = []
    last = 0
    for match in _CODE.finditer(text):
        out.append(_plain(text[last : match.start()]))
        inner = match.group(2)
        if len(match.group(1)) > 1:
            inner = inner.strip()
        out.append(f"<code>{_escape(inner)}</code>")
        last = match.end()
    out.append(_plain(text[last:]))
    return "".join(out)


def _plain(text: str) -> str:
    if "\\|" in text:
        text = text.replace("\\|", "|")
    if text.startswith("**"):
        return _LABEL.sub(r"<strong>\1</strong>", text)
    return text


def _links(html: str) -> str:
    """`[text](#anchor)` (only in-page anchors: a manifest cannot plant a link)."""
    if "](#" not in html:
        return html
    return _LINK.sub(r'<a href="\2">\1</a>', html)


def _slug(text: str) -> str:
    """The anchor a Markdown renderer gives a heading (GitHub's rule), so the page's
    `#anchor` links work in both forms."""
    text = text.lower().replace("`", "")
    kept = "".join(ch for ch in text if ch.isalnum() or ch in " -_")
    return kept.replace(" ", "-")


def _cells(row: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip())[1:-1]]


def _table(rows: list[str]) -> list[str]:
    head, body = _cells(rows[0]), [_cells(r) for r in rows[2:]]
    out = ["<table>", "<thead><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head)]
    out[-1] += "</tr></thead>"
    out.append("<tbody>")
    for cells in body:
        line = "".join(f"<td>{_links(_inline(c))}</td>" for c in cells)
        out.append(f"<tr>{line}</tr>")
    out += ["</tbody>", "</table>"]
    return out


def page_html(markdown: str) -> str:
    """The one-page HTML of a `docs_markdown` page."""
    lines = markdown.split("\n")
    body: list[str] = []
    title = "MiniApp reference"
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = re.match(r"\A(`{3,})json\Z", line)
        if fence:
            end = lines.index(fence.group(1), i + 1)
            text = "\n".join(_escape(x) for x in lines[i + 1 : end])
            body.append(f'<pre><code class="language-json">{text}</code></pre>')
            i = end + 1
            continue
        heading = re.match(r"\A(#{1,3}) (.*)\Z", line)
        if heading:
            level, text = len(heading.group(1)), heading.group(2)
            if level == 1:
                title = re.sub(r"<[^>]+>", "", _inline(text))
            anchor = f' id="{_slug(text)}"' if level < 3 else ""
            body.append(f"<h{level}{anchor}>{_inline(text)}</h{level}>")
            i += 1
            continue
        if line.startswith("|"):
            end = i
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            body += _table(lines[i:end])
            i = end
            continue
        if line.startswith("- "):
            body.append("<ul>")
            while i < len(lines) and lines[i].startswith("- "):
                body.append(f"<li>{_links(_inline(lines[i][2:]))}</li>")
                i += 1
            body.append("</ul>")
            continue
        if line.strip():
            para = []
            while i < len(lines) and lines[i].strip() and not _starts_block(lines[i]):
                para.append(_links(_inline(lines[i])))
                i += 1
            body.append("<p>" + "\n".join(para) + "</p>")
            continue
        i += 1
    head = (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{title}</title>\n<style>\n{_STYLE}\n</style>\n</head>\n<body>\n"
    )
    return head + "\n".join(body) + "\n</body>\n</html>\n"


def _starts_block(line: str) -> bool:
    return line.startswith(("#", "|", "- ", "```"))
