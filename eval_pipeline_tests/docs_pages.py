"""The pages a reader reads (the README, the manual under docs/, the benchmarks' README) and
what they tell the reader to paste: a fenced block preceded by ``<!-- paste: PATH -->`` is
the whole content of the file PATH (relative to the repository's root)."""

from __future__ import annotations

import re
from pathlib import Path

from eval_pipeline.settings import PROJECT_ROOT

PASTE = re.compile(r"^<!-- paste: (?P<path>\S+) -->\n```[a-z]*\n(?P<text>.*?)^```$", re.MULTILINE | re.DOTALL)


def doc_pages() -> list[Path]:
    """Every page: the README, benchmarks/README.md and each page of the manual."""
    manual = sorted(p for p in (PROJECT_ROOT / "docs").rglob("*.md") if "tools" not in p.parts)
    return [PROJECT_ROOT / "README.md", PROJECT_ROOT / "benchmarks" / "README.md", *manual]


def pasted_files(page: Path) -> dict[str, str]:
    """PATH → content of every block ``page`` tells the reader to paste, in page order."""
    return {m["path"]: m["text"] for m in PASTE.finditer(page.read_text(encoding="utf-8"))}
