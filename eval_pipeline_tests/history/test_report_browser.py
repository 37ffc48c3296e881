"""The HTML report as a reader sees it, in headless Chromium at the default size: it leads with
the latest run's failing cases, and no two legend entries of a chart overlap, even with many
series with long names."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.run.pipeline import LaneRun

from ..browser.chromium import browser_page, needs_chromium
from .conftest import CANDIDATE_RUNS, METRICS_PER_RUN, REFERENCE_RUNS, StoredRun, record_run

pytestmark = [pytest.mark.slow, needs_chromium]

# Runtime names as long as a target name may be, so legends must wrap.
LONG_RUNTIMES = (
    "staging-gateway-eu-west-1-gpt-4-1-mini",
    "openai-3f2a9c1d",
    "candidate-with-a-very-long-name-2",
)

# Every legend entry's box, per chart, as the browser laid them out.
_LEGEND_BOXES = """
() => [...document.querySelectorAll('section svg[role="img"]')].map(svg =>
  [...svg.querySelectorAll('text.legend')].map(t => {
    const r = t.getBoundingClientRect();
    return {x: r.left, y: r.top, w: r.width, h: r.height, svgRight: svg.getBoundingClientRect().right};
  }))
"""


def _overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return (
        a["x"] < b["x"] + b["w"]
        and b["x"] < a["x"] + a["w"]
        and a["y"] < b["y"] + b["h"]
        and b["y"] < a["y"] + a["h"]
    )


def test_report_leads_with_failures_and_legends_never_overlap(
    history_root: Path, lane_runs: dict[bool, LaneRun], tmp_path: Path
) -> None:
    root = str(history_root)
    for stored in (*CANDIDATE_RUNS, *REFERENCE_RUNS):
        record_run(root, lane_runs[stored.glossed], stored)
    for index, runtime in enumerate(LONG_RUNTIMES):
        for day, glossed in (("2024-03-05", True), ("2024-03-06", index % 2 == 0)):
            record_run(root, lane_runs[glossed], StoredRun(f"run-{index}-{day}", runtime, day, glossed))
    out = tmp_path / "report"
    result = CliRunner().invoke(app, ["report", "--out", str(out)])
    assert result.exit_code == 0, result.output
    shots = Path(os.environ.get("EVAL_PIPELINE_SCREENSHOTS", tmp_path))
    with browser_page(width=1280, height=900) as page:
        ui: Any = page
        ui.goto((out / "index.html").as_uri())
        charts = ui.evaluate(_LEGEND_BOXES)
        assert len(charts) == METRICS_PER_RUN and all(
            len(boxes) == 5 for boxes in charts
        )  # five series per chart
        for boxes in charts:
            for i, a in enumerate(boxes):
                assert a["x"] + a["w"] <= a["svgRight"] + 0.5, a  # inside its chart
                for b in boxes[i + 1 :]:
                    assert not _overlap(a, b), (a, b)
        # The first screen is the latest run: its checks and failing cases come before any chart.
        first_failing = ui.locator("h4", has_text="Failing cases").first.bounding_box()
        first_chart = ui.locator('section svg[role="img"]').first.bounding_box()
        assert first_failing["y"] < first_chart["y"]
        ui.screenshot(path=str(shots / "report.png"), full_page=False)
        ui.locator("div.charts").first.screenshot(path=str(shots / "report-charts.png"))


def test_report_open_hands_the_file_to_the_browser(history_root: Path, tmp_path: Path) -> None:
    seen = tmp_path / "opened.txt"
    opener = tmp_path / "browser.sh"
    opener.write_text(f'#!/bin/sh\nprintf "%s" "$1" > {seen}\n', encoding="utf-8")
    opener.chmod(0o755)
    out = tmp_path / "report"
    result = CliRunner().invoke(app, ["report", "--out", str(out), "--open"], env={"BROWSER": str(opener)})
    assert result.exit_code == 0, result.output
    assert seen.read_text(encoding="utf-8") == (out / "index.html").resolve().as_uri()
