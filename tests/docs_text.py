"""The docs as the tests read them: README.md and the MkDocs pages under docs/."""

from __future__ import annotations

from conftest import ROOT


def page(path: str) -> str:
    """One page, by its path from the repository root (README.md, docs/...)."""
    return (ROOT / path).read_text()


def docs_text() -> str:
    """README.md and every page under docs/, one text: for claims that may live on any page."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return "\n\n".join(p.read_text() for p in pages)


def section_table(text: str, header: str) -> list[list[str]]:
    """The rows of the Markdown table under `header` (a line of the text), cells stripped."""
    lines = text.splitlines()
    start = lines.index(header)  # the table is gone or renamed: fix the test with it
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows
