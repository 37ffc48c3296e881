"""What a ``promptfoo view`` user looks for, in ``eval-pipeline view`` over a real history through
real HTTP: the grid's prompt column, each runtime column's pass rate and a filter per predicate;
the run and series pages without empty usage rows or charts, checked metrics first; the compare
page with the figures ``eval-pipeline compare`` prints and a word diff of each flip's surfaces;
a derived runtime name shown with its spec."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator

import pandas as pd
import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.history.views import connect
from eval_pipeline.lanes import find_lane
from eval_pipeline.metrics.usage import USAGE_METRICS
from eval_pipeline.run.pipeline import LaneRun, evaluate_lane
from eval_pipeline.runtimes import build_runtime
from eval_pipeline.viewer.pages import word_diff

from .conftest import FLIPPING_CASES, LANE, SPLIT, StoredRun, record_run
from .test_viewer import SCRIPT, with_surface
from .viewer_server import get, serving

# A runtime named as an undeclared spec is (its manifest's runtime_spec: reference:no-gloss).
DERIVED = StoredRun("run-d1", "reference-53347daa", "2024-04-02", False)
WARM = "warmed_session_consistency"


@pytest.fixture
def viewer(history: str, lane_runs: dict[bool, LaneRun]) -> Iterator[str]:
    """The fixture history plus a run of a derived runtime name, a run answering a script and a
    run of a lane judged per turn (no case rows), served."""
    record_run(history, lane_runs[False], DERIVED)
    hostile = with_surface(lane_runs[False], "fluency_truth_001", SCRIPT)
    record_run(history, hostile, StoredRun("run-x1", "hostile", "2024-03-03", False))
    warm = evaluate_lane(find_lane(WARM), SPLIT, build_runtime("reference:warm-drift"))
    record_run(history, warm, StoredRun("run-w1", "reference-warm-drift", "2024-04-03", False, lane=WARM))
    with serving(history) as url:
        yield url


def grid_headers(page: str) -> dict[str, tuple[int, int]]:
    """Each runtime column's name and the pass rate its header reads (passing, cases)."""
    return {
        name: (int(passing), int(cases))
        for name, passing, cases in re.findall(
            r'<th><span class="runtime">([\w-]+)</span>.*?<span class="pass-rate">(\d+)/(\d+) pass', page
        )
    }


def grid_cases(page: str) -> list[str]:
    return re.findall(r"<tr><td>(\w+)</td>", page)


def test_the_grid_shows_each_case_prompt_each_columns_pass_rate_and_filters_by_predicate(
    viewer: str, history: str
) -> None:
    runs = {
        "candidate": "run-c4",
        "reference": "run-r2",
        "hostile": "run-x1",
        DERIVED.runtime: DERIVED.run_id,
    }
    with connect(history) as con:
        rows = con.execute(
            "SELECT run_id, case_id, predicate, passed FROM case_predicates WHERE run_id IN (SELECT unnest(?))",
            [list(runs.values())],
        ).df()
        prompts = dict(
            con.execute(
                "SELECT case_id, arg_min(prompt, turn_index) FROM transcripts WHERE run_id = 'run-r2' GROUP BY ALL"
            ).fetchall()
        )
    status, page = get(viewer + f"/lanes/{LANE}/grid?split={SPLIT}")
    assert status == 200

    # Each column's header: of the grid's cases, those that failed no case predicate in that run
    # and passed one.
    by_case = rows.groupby(["run_id", "case_id"])["passed"].agg(
        lambda p: bool(not (p == False).any() and (p == True).any())  # noqa: E712 (nullable)
    )
    verdicts: dict[str, list[bool]] = {}
    for key, ok in by_case.items():
        verdicts.setdefault(str(key[0]), []).append(bool(ok))  # type: ignore[index]
    passes = {runtime: verdicts[run_id] for runtime, run_id in runs.items()}
    expected = {runtime: (sum(ok), len(ok)) for runtime, ok in passes.items()}
    assert grid_headers(page) == expected
    assert expected["reference"][0] > expected["candidate"][0]  # the no-gloss run fails more cases

    # The prompt column: each case's prompt, beside its id.
    shown = re.findall(r'<tr><td>(\w+)</td><td class="prompt">([^<]*)</td>', page)
    assert len(shown) == 15 and all(html.unescape(text) == prompts[case] for case, text in shown)
    assert ("fluency_truth_001", "What is truth?") in shown

    # A filter per predicate: only the cases where it failed in some column; the headers still
    # read the rates over every case.
    failed = rows[rows["passed"] == False]  # noqa: E712 (a nullable column)
    options = re.findall(r'<option value="(\w+)"[^>]*>\w+ failed</option>', page)
    assert options == sorted(failed["predicate"].unique()) and "no_provenance_only" in options
    for predicate in ("no_provenance_only", options[0]):
        _, narrowed = get(viewer + f"/lanes/{LANE}/grid?split={SPLIT}&predicate={predicate}")
        assert grid_cases(narrowed) == sorted(
            failed.loc[failed["predicate"] == predicate, "case_id"].unique()
        )
        assert f'<option value="{predicate}" selected>' in narrowed
        assert grid_headers(narrowed) == expected
    _, narrowed = get(viewer + f"/lanes/{LANE}/grid?split={SPLIT}&predicate=no_provenance_only")
    assert set(FLIPPING_CASES) <= set(grid_cases(narrowed))
    _, none = get(viewer + f"/lanes/{LANE}/grid?split={SPLIT}&predicate=never_failed")
    assert "0 case(s) where never_failed failed in some run." in none and grid_headers(none) == expected


def test_a_lane_judged_per_turn_counts_its_cases_on_the_run_page_and_grid(viewer: str, history: str) -> None:
    with connect(history) as con:
        placeholders = [
            case
            for (case,) in con.execute(
                "SELECT DISTINCT case_id FROM turn_verdicts WHERE run_id = 'run-w1' "
                "AND predicate = 'no_warm_placeholder' AND passed = false ORDER BY case_id"
            ).fetchall()
        ]
    _, run = get(viewer + "/runs/run-w1")
    assert "Day 2024-04-03 · 8 case(s) · 23 turn(s) recorded" in run
    _, grid = get(viewer + f"/lanes/{WARM}/grid?split={SPLIT}")
    passing, cases = grid_headers(grid)["reference-warm-drift"]
    assert cases == 8 and passing < 8
    assert re.search(r'<tr><td>warm_define_justice_004</td><td class="prompt">Define justice.</td>', grid)
    _, narrowed = get(viewer + f"/lanes/{WARM}/grid?split={SPLIT}&predicate=no_warm_placeholder")
    assert grid_cases(narrowed) == placeholders and "warm_define_justice_004" in placeholders


def checks_rows(page: str) -> list[tuple[str, str]]:
    """The run page's metrics table: each metric and its threshold cell, in order."""
    table = page.split('<table class="checks">', 1)[1].split("</table>", 1)[0]
    return re.findall(r"<tr><td>(\w+)</td><td[^>]*>[^<]*</td><td[^>]*>.*?</td><td>([^<]*)</td>", table)


def test_the_run_page_puts_checks_first_and_hides_usage_no_run_reported(viewer: str, history: str) -> None:
    with connect(history) as con:
        metrics = con.execute("SELECT metric, value, threshold FROM metrics WHERE run_id = 'run-r2'").df()
    valued = set(metrics.loc[metrics["value"].notna(), "metric"])
    empty_usage = [m for m in USAGE_METRICS if m not in valued]
    assert "completion_tokens" in empty_usage and "turns_driven" in valued  # the reference counts no tokens
    _, page = get(viewer + "/runs/run-r2")
    usage = page.split('<table class="usage">', 1)[1].split("</table>", 1)[0]
    assert re.findall(r"<tr><td>(\w+)</td>", usage) == [m for m in USAGE_METRICS if m in valued]
    assert all(f"<td>{m}</td>" not in page for m in empty_usage)
    rows = checks_rows(page)
    checked = [metric for metric, threshold in rows if threshold.strip()]
    assert checked == [metric for metric, _ in rows[: len(checked)]]  # every checked metric first
    assert sorted(checked) == sorted(metrics.loc[metrics["threshold"].notna(), "metric"])


def test_the_series_page_charts_checked_metrics_first_and_no_metric_without_a_value(
    viewer: str, history: str
) -> None:
    with connect(history) as con:
        metrics = con.execute(
            "SELECT metric, bool_or(value IS NOT NULL) AS valued, bool_or(threshold IS NOT NULL) AS checked "
            "FROM metrics WHERE runtime = 'candidate' AND lane = ? GROUP BY metric",
            [LANE],
        ).df()
    _, page = get(viewer + f"/series?lane={LANE}&split={SPLIT}&runtime=candidate&case_set={SPLIT}")
    charts = re.findall(r'role="img" aria-label="(\w+)"', page)
    valued = metrics[metrics["valued"]]
    assert sorted(charts) == sorted(valued["metric"]) and "completion_tokens" not in charts
    checked = sorted(valued.loc[valued["checked"], "metric"])
    assert charts[: len(checked)] == checked and charts[len(checked) :] == sorted(set(charts) - set(checked))


def test_the_compare_page_shows_what_compare_prints_and_diffs_each_flips_surfaces(
    viewer: str, history: str
) -> None:
    printed = CliRunner().invoke(
        app, ["compare", "--run", "run-r2", "--run", "run-c4", "--history", history, "--json"]
    )
    assert printed.exit_code == 0, printed.output
    document = json.loads(printed.output)
    tested = [m for m in document["metrics"] if m["p_value"] is not None]
    assert tested and min(m["p_holm"] for m in tested) < 0.05  # the gloss lift is significant

    status, page = get(viewer + "/compare?a=run-r2&b=run-c4")
    assert status == 200
    stats = page.split('<table class="stats">', 1)[1].split("</table>", 1)[0]
    shown = {
        metric: (p, p_holm)
        for metric, p, p_holm in re.findall(
            r'<tr><td>(\w+)</td>.*?<td class="num p">([^<]*)</td><td class="num p-holm">([^<]*)</td></tr>',
            stats,
        )
    }
    assert shown == {m["metric"]: (f"{m['p_value']:.4g}", f"{m['p_holm']:.4g}") for m in tested}
    for m in tested:
        assert f"<td>{m['method']}</td>" in stats
    assert all(
        re.search(
            rf"<tr><td>{m['metric']}</td>.*?<td class=\"verdict[^\"]*\">{re.escape(m['verdict'])}</td>", page
        )
        for m in document["metrics"]
    )

    # Each flip's diff cell holds B's surface once the deletions are taken out, A's once the
    # insertions are.
    flips = pd.DataFrame(document["flips"])
    cells = re.findall(r'<td class="surface diff">(.*?)</td></tr>', page, re.DOTALL)
    assert len(cells) == len(flips) > 0
    for cell, (_, flip) in zip(cells, flips.iterrows(), strict=True):
        before = html.unescape(re.sub(r"</?del>", "", re.sub(r"<ins>.*?</ins>", "", cell)))
        after = html.unescape(re.sub(r"</?ins>", "", re.sub(r"<del>.*?</del>", "", cell)))
        assert (before, after) == (flip["surface_a"], flip["surface_b"])
    assert "<del>" in page and "<ins>" in page


def test_a_surface_in_a_diff_is_text_never_markup(viewer: str) -> None:
    status, page = get(viewer + "/compare?a=run-r2&b=run-x1")
    assert status == 200 and "fluency_truth_001" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script" not in page


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("the cat sat on the mat", "the cat sat on a mat"),
        ("A belief is a claim that someone holds.", "belief — a claim (meta): that someone holds it."),
        ("", "new"),
        ("old", ""),
        ("same  text\n", "same  text\n"),
    ],
)
def test_a_word_diff_rebuilds_both_surfaces(before: str, after: str) -> None:
    segments = word_diff(before, after)
    assert "".join(t for op, t in segments if op != "inserted") == before
    assert "".join(t for op, t in segments if op != "deleted") == after
    assert all(t for _, t in segments)


def test_a_derived_runtime_name_is_shown_with_its_spec(viewer: str) -> None:
    spec = '<span class="spec" title="runtime reference-53347daa is the spec reference:no-gloss">spec reference:no-gloss</span>'
    series = f"/series?lane={LANE}&split={SPLIT}&runtime={DERIVED.runtime}&case_set={SPLIT}"
    for path in (
        "/",
        f"/lanes/{LANE}",
        f"/lanes/{LANE}/grid?split={SPLIT}",
        "/runs/run-d1",
        "/runs/run-d1/cases/fluency_truth_001",
        series,
        "/compare?a=run-r2&b=run-d1",
    ):
        status, page = get(viewer + path)
        assert status == 200 and spec in page, path
    _, home = get(viewer + "/")
    assert "spec reference<" not in home  # a name that is its own spec carries none
