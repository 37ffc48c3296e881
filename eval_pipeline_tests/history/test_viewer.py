"""``eval-pipeline view`` over a real history, through real HTTP: what each page says, what it
escapes, how it pages, what it answers for what history does not hold."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import duckdb
import pandas as pd
import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.core.series import Series
from eval_pipeline.history.runs import find_runs
from eval_pipeline.history.store import run_file
from eval_pipeline.history.views import connect
from eval_pipeline.metrics.samples import sample_count
from eval_pipeline.outcome.failures import failing_cases
from eval_pipeline.run.pipeline import LaneRun
from eval_pipeline.viewer import case_page_url, pages, run_page_url
from eval_pipeline.viewer.links import SERVED
from eval_pipeline.viewer.pages import runs as runs_page
from eval_pipeline.viewer.render import render

from .conftest import FLIPPING_CASES, LANE, METRICS_PER_RUN, SPLIT, StoredRun, record_run
from .test_report import sampled
from .viewer_server import get, serving

SCRIPT = "<script>alert(1)</script>"


def with_surface(run: LaneRun, case_id: str, surface: str) -> LaneRun:
    """``run`` with ``case_id``'s every surface replaced (what a hostile runtime could answer)."""
    transcripts = run.transcripts.copy()
    transcripts.loc[transcripts["case_id"] == case_id, "surface"] = surface
    return dataclasses.replace(run, transcripts=transcripts)


def failing_of_run(con: duckdb.DuckDBPyConnection, run_id: str) -> pd.DataFrame:
    """What :func:`failing_cases` lists of a run's case predicates in history, read whole."""
    case_predicates = con.execute("SELECT * FROM case_predicates WHERE run_id = ?", [run_id]).df()
    return failing_cases([case_predicates], sample_count(case_predicates)).rows


@pytest.fixture
def viewer(history: str, lane_runs: dict[bool, LaneRun]) -> Iterator[str]:
    """The viewer over the fixture history plus a no-gloss run and a run answering a script."""
    record_run(history, lane_runs[False], StoredRun("run-ng1", "reference-no-gloss", "2024-03-02", False))
    hostile = with_surface(lane_runs[True], "fluency_truth_001", SCRIPT)
    record_run(history, hostile, StoredRun("run-x1", "hostile", "2024-03-03", True))
    with serving(history) as url:
        yield url


def test_pages_answer_with_what_history_holds(viewer: str, history: str) -> None:
    with connect(history) as con:
        failing = failing_of_run(con, "run-c4")
    status, home = get(viewer + "/")
    assert status == 200
    for runtime in ("candidate", "reference", "reference-no-gloss", "hostile"):
        assert SERVED.series(Series(LANE, SPLIT, runtime, SPLIT)).replace("&", "&amp;") in home  # type: ignore[union-attr]
    assert 'href="/runs/run-c4">run-c4</a> 2024-04-01</td><td class="warn">warn</td>' in home
    status, run = get(viewer + "/runs/run-c4")
    cases = failing["case_id"].nunique()
    assert status == 200 and f"Failing cases ({cases} case(s), {len(failing)} result(s))" in run
    assert {*FLIPPING_CASES} <= set(re.findall(r'href="/runs/run-c4/cases/(\w+)"', run))
    status, case = get(viewer + "/runs/run-c4/cases/fluency_truth_001")
    assert status == 200 and "What is truth?" in case and "dotted_inventory" in case
    with connect(history) as con:
        (charted,) = con.execute(  # a chart per metric with a value in some run of the series
            "SELECT count(DISTINCT metric) FILTER (WHERE value IS NOT NULL), count(DISTINCT metric) "
            "FROM metrics WHERE runtime = 'candidate'"
        ).fetchall()
    status, series = get(viewer + f"/series?lane={LANE}&split={SPLIT}&runtime=candidate&case_set={SPLIT}")
    assert (
        status == 200
        and series.count('role="img"') == charted[0]
        and charted[1] == METRICS_PER_RUN
        and "Its runs (4), newest first" in series
    )


def test_a_surface_is_text_never_markup(viewer: str) -> None:
    for path in ("/runs/run-x1/cases/fluency_truth_001", f"/lanes/{LANE}/grid?split={SPLIT}&q=alert"):
        status, html = get(viewer + path)
        assert status == 200
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script" not in html


def test_the_grid_filters_and_searches_in_the_query(viewer: str) -> None:
    _, every = get(viewer + f"/lanes/{LANE}/grid?split={SPLIT}")
    assert "15 case(s)." in every
    assert re.findall(r'<th><span class="runtime">([\w-]+)</span>', every) == [
        "candidate",
        "hostile",
        "reference",
        "reference-no-gloss",
    ]
    _, disagree = get(viewer + f"/lanes/{LANE}/grid?split={SPLIT}&filter=disagree")
    assert set(re.findall(r"<tr><td>(\w+)</td>", disagree)) == set(FLIPPING_CASES)
    _, search = get(viewer + f"/lanes/{LANE}/grid?split={SPLIT}&q=JUSTICE")  # a case id, any case
    assert re.findall(r"<tr><td>(\w+)</td>", search) == ["fluency_justice_009"]
    _, by_text = get(viewer + f"/lanes/{LANE}/grid?split={SPLIT}&q={quote('claim that someone holds')}")
    assert re.findall(r"<tr><td>(\w+)</td>", by_text) == ["fluency_belief_004"]  # a surface's words


def test_what_history_does_not_hold_is_a_404_that_says_what(viewer: str) -> None:
    for path, missing in (
        ("/runs/no-such-run", "no run &#39;no-such-run&#39; in history"),
        ("/runs/run-c4/cases/no_such_case", "no case &#39;no_such_case&#39; in run &#39;run-c4&#39;"),
        (f"/lanes/no_such_lane/grid?split={SPLIT}", "no lane &#39;no_such_lane&#39; in history"),
        ("/lanes/no_such_lane", "no lane &#39;no_such_lane&#39; in history"),
        (f"/lanes/{LANE}/grid?split=locked", "has no runs of split &#39;locked&#39;"),
        ("/compare?a=run-c4&b=no-such-run", "no run &#39;no-such-run&#39; in history"),
        ("/no/such/page", "no page &#39;/no/such/page&#39;"),
    ):
        status, html = get(viewer + path)
        assert status == 404 and missing in html and '<a href="/">' in html, (path, html)
    status, html = get(viewer + "/runs/run-c4?page=0")
    assert status == 400 and "page must be a whole number from 1" in html


def test_an_empty_history_says_how_to_make_a_run(tmp_path: Path) -> None:
    with serving(str(tmp_path / "empty")) as url:
        status, html = get(url + "/")
    assert status == 200 and "No runs in history yet." in html and "eval-pipeline run" in html


def test_an_unreadable_history_is_bad_input() -> None:
    result = CliRunner().invoke(app, ["view", "--history", "nosuchscheme://bucket/history"])
    assert result.exit_code == 2
    assert "cannot read history 'nosuchscheme://bucket/history'" in result.output
    assert "nosuchscheme" in result.output.splitlines()[-1]


def test_a_run_page_reads_one_page_of_failing_cases(history: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs_page, "RUN_PAGE_ROWS", 4)
    with connect(history) as con:
        expected = failing_of_run(con, "run-c4")
        first, third = pages.run_page(con, "run-c4", 1), pages.run_page(con, "run-c4", 3)
    assert first.pages == third.pages == -(-len(expected) // 4) > 3
    (lane,) = third.lanes
    assert lane.failing_results == len(expected) and lane.failing_cases == expected["case_id"].nunique()
    shown = [(row.case_id, row.predicate, row.reason) for row in lane.failing]
    assert (
        shown == list(expected[["case_id", "predicate", "reason"]].itertuples(index=False, name=None))[8:12]
    )
    assert all(row.surface for row in lane.failing)  # surfaces of the rows shown


def test_links_to_the_viewer_follow_its_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVAL_PIPELINE_VIEWER_URL", raising=False)
    assert run_page_url("run-1") is None and case_page_url("run-1", "c") is None
    monkeypatch.setenv("EVAL_PIPELINE_VIEWER_URL", "http://viewer.internal:8765/")
    assert run_page_url("run 1/a") == "http://viewer.internal:8765/runs/run%201%2Fa"
    assert case_page_url("run-1", "case/2") == "http://viewer.internal:8765/runs/run-1/cases/case%2F2"


def test_failing_cases_read_by_the_query_are_those_failures_lists(
    history: str, lane_runs: dict[bool, LaneRun]
) -> None:
    # Three samples of a runtime whose glosses come and go: each failing case predicate once,
    # from its first failing sample, saying in how many it failed.
    stored = StoredRun("run-s1", "sampled", "2024-04-02", True)
    record_run(history, sampled([lane_runs[False], lane_runs[True], lane_runs[False]]), stored)
    with connect(history) as con:
        expected = failing_of_run(con, "run-s1")
        (ref,) = find_runs(con, "run-s1")
        failing = pages.failing_of(con, ref, samples=3, limit=1000)
    assert failing.results == len(expected) > 0 and failing.cases == expected["case_id"].nunique()
    assert [(r.case_id, r.predicate, r.severity, r.code, r.reason) for r in failing.rows] == list(
        expected[["case_id", "predicate", "severity", "code", "reason"]].itertuples(index=False, name=None)
    )
    counts = {re.match(r"In (\d) of 3 samples: ", r.reason).group(1) for r in failing.rows}  # type: ignore[union-attr]
    assert counts == {"2", "3"}  # the no-gloss samples' failures, and the case that fails in all three


def test_a_port_in_use_is_bad_input(history: str) -> None:
    with serving(history) as url:
        port = url.rsplit(":", 1)[1]
        result = CliRunner().invoke(app, ["view", "--history", history, "--port", port])
    assert result.exit_code == 2 and f"cannot listen on 127.0.0.1:{port}" in result.output


def test_a_whole_run_id_names_its_run_when_it_prefixes_another(
    history: str, lane_runs: dict[bool, LaneRun]
) -> None:
    record_run(history, lane_runs[True], StoredRun("run-r2-retry", "reference", "2024-03-03", True))
    with connect(history) as con:
        assert [ref.run_id for ref in find_runs(con, "run-r2")] == ["run-r2"]
        assert [ref.run_id for ref in find_runs(con, "run-r2-")] == ["run-r2-retry"]
        with pytest.raises(KeyError, match="ambiguous"):
            find_runs(con, "run-r")
        assert pages.run_page(con, "run-r2").run_id == "run-r2"


def test_a_run_page_lists_the_cases_whose_samples_disagree(
    history: str, lane_runs: dict[bool, LaneRun]
) -> None:
    stored = StoredRun("run-s1", "sampled", "2024-04-02", True)
    record_run(history, sampled([lane_runs[True], lane_runs[False], lane_runs[True]]), stored)
    with connect(history) as con:
        page = pages.run_page(con, "run-s1")
        html = render("run.html", SERVED, title="run", page=page, path="/runs/run-s1")
    (lane,) = page.lanes
    assert lane.samples == 3 and lane.flaky.cases == len(FLIPPING_CASES)
    assert {(row.case_id, row.passes, row.flips) for row in lane.flaky.rows} == {
        (case, 2, 2) for case in FLIPPING_CASES
    }
    assert f"Flaky within the run ({len(FLIPPING_CASES)} case(s) whose 3 samples disagree)" in html


def test_a_history_that_breaks_while_served_is_a_503_saying_why(history: str) -> None:
    with serving(history) as url:
        assert get(url + "/runs/run-c4")[0] == 200
        Path(run_file(history, "transcripts", LANE, "2024-04-01", "run-c4")).write_bytes(b"not parquet")
        status, html = get(url + "/runs/run-c4")
    assert status == 503 and f"cannot read history &#39;{history}&#39;" in html
    assert "run-c4.parquet" in html and '<a href="/">' in html
