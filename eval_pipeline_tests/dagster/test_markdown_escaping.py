"""Case text in Dagster markdown metadata is shown literally: no HTML, links or extra cells;
numbers as every view shows them."""

from __future__ import annotations

import pandas as pd

from eval_pipeline.dagster_wiring.assets import failing_cases_markdown
from eval_pipeline.outcome.failures import FirstFailing, failing_cases
from eval_pipeline.report.markdown import escape_markdown, markdown_table

HOSTILE = "<img src=x onerror=alert(1)> [click](javascript:alert(1)) a|b **bold** `code` <javascript:x>\nnext"


def test_hostile_case_text_becomes_inert_text() -> None:
    escaped = escape_markdown(HOSTILE)
    assert "<" not in escaped and ">" not in escaped
    assert "&lt;img src=x onerror=alert\\(1\\)&gt;" in escaped
    assert "\\[click\\]\\(javascript\\:alert\\(1\\)\\)" in escaped
    assert "a\\|b" in escaped and "\\*\\*bold\\*\\*" in escaped and "\\`code\\`" in escaped
    assert "\n" not in escaped


def test_a_table_row_keeps_its_cells() -> None:
    table = markdown_table(
        [{"case_id": "x|y", "message": HOSTILE}], ("case_id", "message"), limit=5, more="rows"
    )
    row = table.splitlines()[2]
    unescaped_pipes = row.replace("\\|", "").count("|")
    assert unescaped_pipes == 3  # | case_id | message |


def test_failing_case_predicates_are_escaped() -> None:
    rows = pd.DataFrame(
        [
            {
                "case_id": "c<script>",
                "predicate": "p",
                "severity": "hard",
                "code": "x",
                "message": HOSTILE,
                "passed": False,
            }
        ]
    )
    markdown = failing_cases_markdown(FirstFailing(failing_cases([rows], 1).rows, results=3, cases=2))
    assert "<script>" not in markdown and "<img" not in markdown and "](javascript:" not in markdown
    assert "c&lt;script&gt;" in markdown
    assert markdown.endswith("…and 2 more rows in the case\\_predicates table.")  # of the 3 in all


def test_a_table_shows_numbers_as_every_view_does() -> None:
    table = markdown_table(
        [{"metric": "cases", "value": 1_000_000.0}, {"metric": "rate", "value": 14 / 15}],
        ("metric", "value"),
        limit=5,
        more="rows",
    )
    assert table.splitlines()[2:] == ["| cases | 1000000 |", "| rate | 0.9333 |"]  # not 1e+06
