"""The static HTML report: content, offline-ness, and a render in headless Chromium."""

from __future__ import annotations

import base64
import dataclasses
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pandas as pd
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.history.charts import lane_chart_markdown, lane_chart_svg
from eval_pipeline.history.store import run_file
from eval_pipeline.history.views import connect
from eval_pipeline.run.pipeline import LaneRun

from .conftest import (
    CANDIDATE_RUNS,
    FLIPPING_CASES,
    FLIPPING_PREDICATES,
    LANE,
    METRICS_PER_RUN,
    REFERENCE_RUNS,
    StoredRun,
    record_run,
)


def write(history: str, out: Path) -> str:
    result = CliRunner().invoke(app, ["report", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return (out / "index.html").read_text(encoding="utf-8")


def test_report_content(history: str, tmp_path: Path) -> None:
    html = write(history, tmp_path / "report")
    assert not re.search(r"<script|https?://(?!www\.w3\.org/2000/svg)", html), "the report must open offline"
    section = html[html.index(f'<section id="{LANE}">') :]
    # One trend chart per metric, with the WARN thresholds drawn as dashed lines.
    assert section.count("<svg ") == METRICS_PER_RUN  # a trend chart per metric, usage too
    with connect(history) as con:
        thresholds = con.execute(
            "SELECT count(DISTINCT metric) FROM metrics WHERE threshold IS NOT NULL"
        ).fetchone()
    assert thresholds and thresholds[0] >= 6 and section.count('class="threshold"') == thresholds[0]
    assert "&gt;= 0.85</text>" in section and "<title>no_provenance_only_rate</title>" in section
    # Latest check results of the candidate series: the two WARN checks warn (not "fail").
    candidate = section[section.index("public · candidate · latest run run-c4 (2024-04-01)") :]
    assert re.search(
        r"no_dotted_inventory_rate</td><td>0.3333</td><td>&gt;= 0.85</td><td>WARN</td><td class=\"warn\">warn<",
        candidate,
    )
    # Its failing cases come before the trends, each with its reason and surface.
    failing = candidate[candidate.index("<h4>Failing cases") : candidate.index("<h3>Trends</h3>")]
    assert all(case in failing for case in FLIPPING_CASES)
    assert "The answer lists internal dotted paths instead of prose: “meta.epistemic.truth;" in failing
    assert "truth — pack-grounded (en_core_meta_v1): meta.epistemic.truth; meta.epistemic" in failing
    assert section.index("<h4>Failing cases") < section.index("<h3>Trends</h3>") < section.index("<svg ")
    # Its no_regression findings against run-c3: paired counts and the one-sided p, as the check decides.
    regression = candidate[
        candidate.index("<h4>no_regression against run-c3") : candidate.index("<h4>Failing cases")
    ]
    assert '<span class="warn">warn</span>' in regression
    assert re.search(
        r"no_dotted_inventory_rate</td><td>0.9333</td><td>0.3333</td><td class=\"num\">9</td>"
        r"<td class=\"num\">0</td><td class=\"num\">0.001953</td><td class=\"warn\">regressed<",
        regression,
    )
    assert "3 metric(s) regressed vs run-c3: " in regression
    assert "no_dotted_inventory_rate (9 worse, 0 better of 15, p = 0.001953)" in regression
    # Flipped cases of the latest run, after the trends, with both surfaces.
    flips = section[section.index("public · candidate: flipped cases since run-c3") :]
    flips = flips[: flips.index("public · reference")]
    assert all(case in flips for case in FLIPPING_CASES)
    assert flips.count("pass→fail") == 27
    assert "A belief is a claim that someone holds to be true." in flips
    assert "public · reference: no case flipped since run-r1." in section


def test_lane_chart_for_asset_metadata(history: str) -> None:
    svg = lane_chart_svg(history, LANE)
    assert svg.startswith("<svg") and svg.count('role="img"') == METRICS_PER_RUN
    markdown = lane_chart_markdown(history, LANE)
    encoded = re.fullmatch(r"!\[.*\]\(data:image/svg\+xml;base64,(.+)\)", markdown)
    assert encoded and base64.b64decode(encoded.group(1)).decode() == svg


def test_report_of_an_empty_history(tmp_path: Path) -> None:
    assert "No runs in history yet." in write("unused", tmp_path / "empty")


def _chromium() -> str | None:
    return next(
        (p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None
    )


@pytest.mark.slow
@pytest.mark.skipif(
    _chromium() is None, reason="headless Chromium is not installed (apt-get install chromium)"
)
def test_report_renders_in_headless_chromium(history: str, tmp_path: Path) -> None:
    page = tmp_path / "report" / "index.html"
    write(history, page.parent)
    browser = [
        str(_chromium()),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    dom = subprocess.run([*browser, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=60)
    assert dom.stdout.count("<polyline") >= 20 and "flipped cases since run-c3" in dom.stdout
    shot = tmp_path / "report.png"
    subprocess.run(
        [*browser, "--window-size=1400,1800", f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        timeout=60,
        check=True,
    )
    png = shot.read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 50_000  # a blank page of this size is ~10 kB


def test_report_puts_a_lanes_series_side_by_side(history: str, tmp_path: Path) -> None:
    html = write(history, tmp_path / "report")
    section = html[html.index(f'<section id="{LANE}">') :]
    table = section[
        section.index("<h3>Latest run of each series</h3>") : section.index('<h3 class="latest">')
    ]
    header = re.findall(
        r"<th>([^<]*?)(?: <span class=\"spec\"[^>]*>[^<]*</span>)?<br><small>([^<]*)</small></th>", table
    )
    assert header == [
        ("public · candidate", "run-c4 (2024-04-01)"),
        ("public · reference", "run-r2 (2024-03-02)"),
    ]
    rows = dict(re.findall(r"<tr><td>(\w+)</td>(.*?)</tr>", table))
    assert len(rows) == METRICS_PER_RUN
    # The no-gloss candidate fails the WARN check the glossed reference passes.
    assert (
        rows["no_dotted_inventory_rate"] == '<td class="num warn">0.3333</td><td class="num pass">0.9333</td>'
    )
    assert rows["cases"] == '<td class="num na">15</td><td class="num na">15</td>'  # a count, whole


def sampled(samples: list[LaneRun]) -> LaneRun:
    """One run of len(samples) samples per case, stored as a run with ``--repeat`` stores them:
    every sample's rows tagged with its ``sample_index`` (metrics are the first sample's: the
    report's flaky list reads only the case predicates)."""

    def tagged(attribute: str) -> pd.DataFrame:
        frames = [getattr(run, attribute).assign(sample_index=i) for i, run in enumerate(samples)]
        return pd.concat(frames, ignore_index=True)

    return dataclasses.replace(
        samples[0],
        transcripts=tagged("transcripts"),
        turn_predicates=tagged("turn_predicates"),
        case_predicates=tagged("case_predicates"),
    )


def test_report_lists_the_cases_whose_samples_disagree(
    history: str, lane_runs: dict[bool, LaneRun], tmp_path: Path
) -> None:
    # A runtime whose glosses come and go between samples: on, off, on (two flips per verdict that moves).
    flaky = StoredRun("run-s1", "sampled", "2024-04-02", True)
    record_run(history, sampled([lane_runs[True], lane_runs[False], lane_runs[True]]), flaky)
    steady = StoredRun("run-s2", "steady", "2024-04-02", True)
    record_run(history, sampled([lane_runs[True], lane_runs[True]]), steady)
    html = write(history, tmp_path / "report")
    section = html[html.index("public · sampled · latest run run-s1") :]
    section = section[: section.index('<h3 class="latest">')]
    listed = section[section.index("<h4>Flaky within the run") :]
    assert listed.startswith(
        f"<h4>Flaky within the run ({len(FLIPPING_CASES)} case(s) whose 3 samples disagree)</h4>"
    )
    rows = re.findall(
        r'<tr><td class="warn">(\w+)</td><td>(\w+)</td><td class="num">(\d+/\d+)</td>'
        r'<td class="num">(\d+)</td><td class="num">([\d.]+)</td></tr>',
        listed,
    )
    expected = {(case, predicate) for case in FLIPPING_CASES for predicate in FLIPPING_PREDICATES}
    assert {(case, predicate) for case, predicate, *_ in rows} == expected and len(rows) == len(expected)
    assert {(passed, flips, pass_hat_k) for *_, passed, flips, pass_hat_k in rows} == {("2/3", "2", "0")}
    # Samples that agree say so; one-sample runs (and runs stored before sample_index) list nothing.
    assert "Its 2 samples agree on every case." in html[html.index("public · steady · latest run run-s2") :]
    assert html.count("<h4>Flaky within the run") == 1 and html.count("samples agree on every case") == 1


def test_report_of_history_stored_before_samples(history: str, tmp_path: Path) -> None:
    # Runs written before case_predicates had a sample_index column: one sample each, nothing flaky.
    for stored in (*CANDIDATE_RUNS, *REFERENCE_RUNS):
        path = run_file(history, "case_predicates", LANE, stored.date, stored.run_id)
        old = pq.read_table(path)
        pq.write_table(old.drop_columns(["sample_index"]), path)
        assert "sample_index" not in pq.read_schema(path).names
    html = write(history, tmp_path / "report")
    assert "public · candidate: flipped cases since run-c3" in html
    assert "Flaky within the run" not in html and "samples agree" not in html


def test_every_link_of_the_report_opens_one_of_its_pages(history: str, tmp_path: Path) -> None:
    out = tmp_path / "report"
    write(history, out)
    pages = sorted(out.rglob("*.html"))
    # The index, the latest run of each series (run-c4, run-r2), a page per case they show.
    assert {p.relative_to(out).as_posix() for p in pages} >= {
        "index.html",
        "runs/run-c4/index.html",
        "runs/run-r2/index.html",
        *(f"runs/run-c4/cases/{case}.html" for case in FLIPPING_CASES),
    }
    for page in pages:
        html = page.read_text(encoding="utf-8")
        assert "<script" not in html
        for href in re.findall(r'href="([^"#]+)', html):
            target = (page.parent / unquote(href)).resolve()
            assert target.is_file() and out.resolve() in target.parents, (page, href)
    case = (out / "runs/run-c4/cases/fluency_truth_001.html").read_text(encoding="utf-8")
    assert "What is truth?" in case and "The answer lists internal dotted paths instead of prose" in case
