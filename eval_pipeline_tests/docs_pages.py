"""The pages a reader reads (the README, the manual under docs/, the benchmarks' README) and
what they tell the reader to paste: a fenced block preceded by ``<!-- paste: PATH -->`` is
the whole content of the file PATH (relative to the repository's root)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from eval_pipeline_tests.paths import PROJECT_ROOT

PASTE = re.compile(r"^<!-- paste: (?P<path>\S+) -->\n```[a-z]*\n(?P<text>.*?)^```$", re.MULTILINE | re.DOTALL)


def nav_pages() -> list[Path]:
    """The manual's pages in the order of its nav (``mkdocs.yml``): the order a reader reads,
    and the order their commands run in (a page may name a run an earlier one made)."""
    config = yaml.safe_load((PROJECT_ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    return [PROJECT_ROOT / "docs" / page for page in _nav_files(config["nav"])]


def _nav_files(entries: Any) -> Iterator[str]:
    for entry in entries:
        if isinstance(entry, str):
            yield entry
        elif isinstance(entry, dict):
            for value in entry.values():
                yield from [value] if isinstance(value, str) else _nav_files(value)


def doc_pages() -> list[Path]:
    """Every page: the README, benchmarks/README.md and each page of the manual, in nav order."""
    return [PROJECT_ROOT / "README.md", PROJECT_ROOT / "benchmarks" / "README.md", *nav_pages()]


def pasted_files(page: Path) -> dict[str, str]:
    """PATH → content of every block ``page`` tells the reader to paste, in page order."""
    return {m["path"]: m["text"] for m in PASTE.finditer(page.read_text(encoding="utf-8"))}
