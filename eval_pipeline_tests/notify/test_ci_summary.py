"""``--summary-md``: golden documents, hostile strings rendered as text, GitHub's size limit,
and the baseline read from history through a real run."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.cli.common import EXIT_BAD_INPUT
from eval_pipeline.report.ci_summary import GITHUB_COMMENT_LIMIT, LaneSummary, MetricLine, summary_markdown

GOLDEN = Path(__file__).parent / "golden"
HOSTILE = "a|b `code` <script>alert(1)</script>\nsecond line"
runner = CliRunner()


def failing_lane() -> LaneSummary:
    return LaneSummary(
        title="refusal_calibration/dev [staging]",
        run_id="1a2b3c4d" * 4,
        verdict="fail",
        metrics=[
            MetricLine("refusal_rate", 0.5, 1.0, ">= 0.95 (ERROR)", "fail"),
            MetricLine("fabrication_rate", 0.25, 0.0, "== 0 (ERROR)", "fail"),
            MetricLine("in_grounding_answer_rate", None, 1.0, ">= 0.9 (ERROR)", "n/a"),
            MetricLine("cases", 4, 4),
        ],
        baseline_run_id="9f" * 16,
        failing_rows=[
            {
                "case_id": "refusal_dev_001",
                "predicate": "no_fabrication",
                "severity": "hard",
                "reason": HOSTILE,
            },
            {
                "case_id": "refusal_dev_002",
                "predicate": "plain_refusal",
                "severity": "hard",
                "reason": "defined it",
            },
        ],
        failing_total=2,
        faults=[{"turns": 1, "fault": "HTTP 500 from http://gateway/v1 | <b>down</b>"}],
    )


def first_lane() -> LaneSummary:
    return LaneSummary(
        title="deterministic_fluency/public [reference]",
        run_id="5e5e" * 8,
        verdict="pass",
        metrics=[MetricLine("no_placeholder_rate", 1.0, None, "== 1 (ERROR)", "pass")],
    )


def void_lane() -> LaneSummary:
    return LaneSummary(
        title="deterministic_fluency/public [down]",
        run_id="0d0d" * 8,
        verdict="void",
        baseline_run_id="5e5e" * 8,
        metrics=[MetricLine("error_rate", 1.0, 0.0, "== 0 (WARN)", "void")],
        faults=[{"turns": 15, "fault": "connection failed: POST http://127.0.0.1:9/v1/chat/completions"}],
        notes=["void: 15 of 15 turns faulted (error_rate 1 > max_error_rate 0.05)"],
    )


def golden(name: str, text: str) -> str:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("name", "lanes"),
    [
        ("summary_fail.md", [failing_lane(), first_lane()]),
        ("summary_void.md", [void_lane()]),
        ("summary_pass.md", [first_lane()]),
    ],
)
def test_summary_matches_its_golden_document(name: str, lanes: list[LaneSummary]) -> None:
    assert summary_markdown(lanes) == golden(name, summary_markdown(lanes))


def test_pipes_backticks_script_and_newlines_render_as_text() -> None:
    html = MarkdownIt("commonmark").enable("table").render(summary_markdown([failing_lane()]))
    assert "<script>" not in html and "<code>" not in html and "<b>" not in html
    failing_table = html.split("Failing cases")[1].split("</table>")[0]
    row = next(r for r in failing_table.split("<tr>") if "refusal_dev_001" in r)
    assert row.count("<td>") == 4  # the pipe did not open a fifth cell
    text = re.sub(r"<[^>]+>", "", row)
    assert "a|b `code` &lt;script&gt;alert(1)&lt;/script&gt; second line" in text


def test_a_summary_past_githubs_limit_is_cut_at_a_line_and_says_how_much_was_left_out() -> None:
    rows = [
        {"case_id": f"case_{i}", "predicate": "p", "severity": "hard", "reason": "r" * 400} for i in range(50)
    ]
    lanes = [
        LaneSummary(
            title=f"lane_{n}/dev [reference]",
            run_id=f"{n:032x}",
            verdict="fail",
            failing_rows=rows,
            failing_total=10_000,
        )
        for n in range(10)
    ]
    whole = summary_markdown(lanes, limit=10**9).splitlines()
    assert sum(len(line) + 1 for line in whole) > GITHUB_COMMENT_LIMIT
    text = summary_markdown(lanes)
    assert len(text) <= GITHUB_COMMENT_LIMIT
    left_out = int(re.search(r"…truncated: (\d+) more line\(s\) not shown", text).group(1))  # type: ignore[union-attr]
    assert left_out > 0 and text.startswith("## eval-pipeline: fail")
    shown = text[: text.index("\n…truncated") - 1].split("\n")
    assert shown == whole[: len(shown)] and len(shown) + left_out == len(whole)  # each line shown or counted


@pytest.mark.slow
def test_run_summary_md_compares_with_the_series_previous_run_or_the_baseline_named(tmp_path: Path) -> None:
    args = ["run", "--lane", "deterministic_fluency", "--split", "dev"]
    first, second, named = tmp_path / "first.md", tmp_path / "second.md", tmp_path / "named.md"
    assert (
        runner.invoke(app, [*args, "--runtime", "reference-no-gloss", "--summary-md", str(first)]).exit_code
        == 0
    )
    assert "baseline none (first run of this series)" in first.read_text(encoding="utf-8")
    run_id = re.search(r"\| ([0-9a-f]{8}) \|", first.read_text(encoding="utf-8")).group(1)  # type: ignore[union-attr]
    assert runner.invoke(app, [*args, "--summary-md", str(second)]).exit_code == 0
    assert "baseline none" in second.read_text(encoding="utf-8")  # the reference series is its own
    result = runner.invoke(app, [*args, "--summary-md", str(named), "--baseline", run_id])
    assert result.exit_code == 0
    text = named.read_text(encoding="utf-8")
    assert f"baseline {run_id}" in text
    # reference-no-gloss held 0.5 where the reference holds 1: the delta says so
    assert "| no\\_dotted\\_inventory\\_rate | 1 | 0\\.5 | \\+0\\.5 |" in text
    # A runtime target as the baseline: its latest run of the same lane, split and cases.
    by_runtime = tmp_path / "by-runtime.md"
    result = runner.invoke(app, [*args, "--summary-md", str(by_runtime), "--baseline", "reference-no-gloss"])
    assert result.exit_code == 0
    text = by_runtime.read_text(encoding="utf-8")
    assert f"baseline {run_id}" in text
    assert "| no\\_dotted\\_inventory\\_rate | 1 | 0\\.5 | \\+0\\.5 |" in text
    bad = runner.invoke(app, [*args, "--summary-md", str(tmp_path / "bad.md"), "--baseline", "ffffffff"])
    assert bad.exit_code == EXIT_BAD_INPUT and "no run 'ffffffff' in history" in bad.stderr
    assert "neither a run id (or prefix) nor a runtime target" in bad.stderr
    assert not (tmp_path / "bad.md").exists()
