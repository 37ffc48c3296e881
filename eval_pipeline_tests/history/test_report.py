"""The static HTML report: content, offline-ness, and a render in headless Chromium."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.history.report import lane_chart_markdown, lane_chart_svg
from eval_pipeline.history.views import connect

from .conftest import FLIPPING_CASES, LANE


def write(history: str, out: Path) -> str:
    result = CliRunner().invoke(app, ["report", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return (out / "index.html").read_text(encoding="utf-8")


def test_report_content(history: str, tmp_path: Path) -> None:
    html = write(history, tmp_path / "report")
    assert not re.search(r"<script|https?://(?!www\.w3\.org/2000/svg)", html), "the report must open offline"
    section = html[html.index(f'<section id="{LANE}">') :]
    # One trend chart per metric, with the WARN thresholds drawn as dashed lines.
    assert section.count("<svg ") == 10
    with connect(history) as con:
        thresholds = con.execute(
            "SELECT count(DISTINCT metric) FROM metrics WHERE threshold IS NOT NULL"
        ).fetchone()
    assert thresholds and thresholds[0] >= 6 and section.count('class="threshold"') == thresholds[0]
    assert "&gt;= 0.85</text>" in section and "<title>no_provenance_only_rate</title>" in section
    # Latest check results of the candidate series: the two WARN checks warn (not "fail").
    candidate = section[section.index("public · candidate · latest run run-c4 (2024-04-01)") :]
    assert re.search(
        r"no_dotted_inventory_rate</td><td>0.333</td><td>&gt;= 0.85</td><td>WARN</td><td class=\"warn\">warn<",
        candidate,
    )
    # Its failing cases come before the trends, each with its reason and surface.
    failing = candidate[candidate.index("<h4>Failing cases") : candidate.index("<h3>Trends</h3>")]
    assert all(case in failing for case in FLIPPING_CASES)
    assert "The answer lists internal dotted paths instead of prose: “meta.epistemic.truth;" in failing
    assert "truth — pack-grounded (en_core_meta_v1): meta.epistemic.truth; meta.epistemic" in failing
    assert section.index("<h4>Failing cases") < section.index("<h3>Trends</h3>") < section.index("<svg ")
    # Flipped cases of the latest run, after the trends, with both surfaces.
    flips = section[section.index("public · candidate: flipped cases since run-c3") :]
    flips = flips[: flips.index("public · reference")]
    assert all(case in flips for case in FLIPPING_CASES)
    assert flips.count("pass→fail") == 27
    assert "A belief is a claim that someone holds to be true." in flips
    assert "public · reference: no case flipped since run-r1." in section


def test_lane_chart_for_asset_metadata(history: str) -> None:
    svg = lane_chart_svg(history, LANE)
    assert svg.startswith("<svg") and svg.count('role="img"') == 10
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
    header = re.findall(r"<th>([^<]*)<br><small>([^<]*)</small></th>", table)
    assert header == [
        ("public · candidate", "run-c4 (2024-04-01)"),
        ("public · reference", "run-r2 (2024-03-02)"),
    ]
    rows = dict(re.findall(r"<tr><td>(\w+)</td>(.*?)</tr>", table))
    assert len(rows) == 10
    # The no-gloss candidate fails the WARN check the glossed reference passes.
    assert (
        rows["no_dotted_inventory_rate"] == '<td class="num warn">0.333</td><td class="num pass">0.933</td>'
    )
    assert rows["cases"] == '<td class="num na">15.000</td><td class="num na">15.000</td>'
