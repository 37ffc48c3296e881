"""``eval-pipeline view`` as a reader uses it, in headless Chromium: from every series to a failing
run, to one of its failing cases and its transcript; the grid narrowed to the cases where the
runtimes disagree; the compare page listing what ``eval-pipeline compare`` lists; a surface that
is a script shown as text."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.history.views import connect
from eval_pipeline.run.pipeline import LaneRun

from ..browser.chromium import browser_page, needs_chromium
from .conftest import LANE, REFERENCE_RUNS, SPLIT, StoredRun, record_run
from .test_viewer import SCRIPT, with_surface
from .viewer_server import serving

pytestmark = [pytest.mark.slow, needs_chromium]

NO_GLOSS = StoredRun("run-ng1", "reference-no-gloss", "2024-03-02", False)
# A runtime answering a script, on a split of its own so the public grid holds the two runtimes only.
HOSTILE = StoredRun("run-x1", "hostile", "2024-03-03", True, case_set="hostile", split="hostile")


@pytest.fixture
def root(history_root: Path, lane_runs: dict[bool, LaneRun]) -> str:
    root = str(history_root)
    for stored in (*REFERENCE_RUNS, NO_GLOSS):
        record_run(root, lane_runs[stored.glossed], stored)
    record_run(root, with_surface(lane_runs[True], "fluency_truth_001", SCRIPT), HOSTILE)
    return root


def test_from_every_series_to_a_failing_cases_transcript(root: str, tmp_path: Path) -> None:
    shots = Path(os.environ.get("EVAL_PIPELINE_SCREENSHOTS", tmp_path))
    with serving(root) as url, browser_page(width=1280, height=900) as page:
        ui: Any = page
        ui.goto(url + "/")
        ui.screenshot(path=str(shots / "viewer-home.png"))
        row = ui.locator("table.home tr", has_text="reference-no-gloss")
        assert row.locator("td.warn").inner_text() == "warn"
        row.get_by_role("link", name="run-ng1").click()
        ui.wait_for_url(f"{url}/runs/run-ng1")
        ui.screenshot(path=str(shots / "viewer-run.png"))
        first = ui.locator("table.failing tr td a").first
        case_id = first.inner_text()
        first.click()
        ui.wait_for_url(f"{url}/runs/run-ng1/cases/{case_id}")
        ui.screenshot(path=str(shots / "viewer-case.png"), full_page=True)
        with connect(root) as con:
            turns = con.execute(
                "SELECT prompt, surface FROM transcripts WHERE run_id = 'run-ng1' AND case_id = ? ORDER BY turn_index",
                [case_id],
            ).fetchall()
            reasons = [
                r[0]
                for r in con.execute(
                    "SELECT message FROM case_predicates WHERE run_id = 'run-ng1' AND case_id = ? AND NOT passed",
                    [case_id],
                ).fetchall()
            ]
        shown = ui.locator("div.turn")
        assert shown.count() == len(turns) > 0
        for index, (prompt, surface) in enumerate(turns):
            assert shown.nth(index).locator(".prompt").inner_text() == f"prompt {prompt}"
            assert shown.nth(index).locator(".surface").inner_text() == surface
        listed = ui.locator("table.verdicts td.reason").all_inner_texts()
        assert reasons and all(reason in listed for reason in reasons)


def test_the_grid_of_cases_where_the_runtimes_disagree(root: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["compare", "--lane", LANE, "--runtime", "reference", "--runtime", "reference-no-gloss", "--json"],
        env={"EVAL_PIPELINE_HISTORY": root},
    )
    assert result.exit_code == 0, result.output
    flips = json.loads(result.output)["flips"]
    differing = sorted({flip["case_id"] for flip in flips})
    shots = Path(os.environ.get("EVAL_PIPELINE_SCREENSHOTS", tmp_path))
    with serving(root) as url, browser_page(width=1280, height=900) as page:
        ui: Any = page
        ui.goto(f"{url}/lanes/{LANE}/grid?split={SPLIT}")
        assert ui.locator("table.grid tr").count() == 1 + 15
        ui.get_by_label("runtimes disagree").check()
        ui.get_by_role("button", name="show").click()
        ui.wait_for_url("**filter=disagree**")
        ui.screenshot(path=str(shots / "viewer-grid.png"))
        rows = ui.locator("table.grid tr td:first-child").all_inner_texts()
        assert rows == differing and len(differing) >= 9
        ui.locator("table.grid td.cell a").first.click()
        ui.wait_for_url(f"{url}/runs/**/cases/{differing[0]}")
        # The compare page lists the flips `eval-pipeline compare` lists, in its order.
        ui.goto(f"{url}/compare?a=run-r2&b=run-ng1")
        ui.screenshot(path=str(shots / "viewer-compare.png"))
        table = ui.locator("table.flips tr").all()[1:]
        listed = [tuple(cell.inner_text() for cell in row.locator("td").all()[:3]) for row in table]
        assert listed == [(f["case_id"], f["predicate"], f["change"]) for f in flips]


def test_a_script_surface_renders_as_text(root: str) -> None:
    with serving(root) as url, browser_page() as page:
        ui: Any = page
        dialogs: list[str] = []
        ui.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        for path in (
            f"/runs/{HOSTILE.run_id}/cases/fluency_truth_001",
            f"/lanes/{LANE}/grid?split=hostile&q=alert",
        ):
            ui.goto(url + path)
            assert SCRIPT in ui.locator("body").inner_text()
        assert ui.locator("td.cell").first.inner_text().endswith(SCRIPT)
        assert dialogs == [] and ui.locator("script").count() == 0


def test_a_reader_narrows_the_grid_to_a_predicate_and_reads_a_flips_diff(root: str, tmp_path: Path) -> None:
    with connect(root) as con:
        failed = [
            case
            for (case,) in con.execute(
                "SELECT DISTINCT case_id FROM case_predicates WHERE run_id IN ('run-r2', 'run-ng1') "
                "AND predicate = 'no_provenance_only' AND NOT passed ORDER BY case_id"
            ).fetchall()
        ]
    shots = Path(os.environ.get("EVAL_PIPELINE_SCREENSHOTS", tmp_path))
    with serving(root) as url, browser_page(width=1280, height=900) as page:
        ui: Any = page
        ui.goto(f"{url}/lanes/{LANE}/grid?split={SPLIT}")
        rates = ui.locator("table.grid th .pass-rate").all_inner_texts()
        assert len(rates) == 2 and all(rate.endswith("%)") for rate in rates)
        ui.get_by_label("predicate").select_option("no_provenance_only")
        ui.get_by_role("button", name="show").click()
        ui.wait_for_url("**predicate=no_provenance_only**")
        ui.screenshot(path=str(shots / "viewer-grid-predicate.png"), full_page=True)
        assert ui.locator("table.grid tr td:first-child").all_inner_texts() == failed and len(failed) >= 9
        assert ui.locator("table.grid th .pass-rate").all_inner_texts() == rates  # over every case
        first = ui.locator("table.grid td.prompt").first.inner_text()
        assert first and first.endswith("?")  # the case's question, as sent

        ui.goto(f"{url}/runs/run-ng1")
        ui.screenshot(path=str(shots / "viewer-run-usage.png"), full_page=True)
        assert "null" not in ui.locator("table.usage").inner_text()

        ui.goto(f"{url}/compare?a=run-r2&b=run-ng1")
        ui.screenshot(path=str(shots / "viewer-compare-stats.png"), full_page=True)
        assert ui.locator("table.stats tr").count() > 1
        cell = ui.locator("table.flips td.diff").first
        deleted, inserted = cell.locator("del").first, cell.locator("ins").first
        colours = {part.evaluate("e => getComputedStyle(e).backgroundColor") for part in (deleted, inserted)}
        assert len(colours) == 2 and "rgba(0, 0, 0, 0)" not in colours  # marked apart, both visible
