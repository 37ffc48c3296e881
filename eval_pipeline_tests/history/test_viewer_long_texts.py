"""A page never serves a runtime's whole answer: the viewer cuts each long surface and prompt to
its preview and links to the text whole, which it serves byte for byte as plain text. A failing
turn's row shows that turn's surface, not the case's last one."""

from __future__ import annotations

import dataclasses
import html
import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline.core import Series
from eval_pipeline.history.store import commit_run
from eval_pipeline.history.views import connect
from eval_pipeline.lanes import find_lane, lane_kind
from eval_pipeline.outcome import RunOutcome
from eval_pipeline.outcome.failures import failing_cases
from eval_pipeline.outcome.run_outcome import failing_items, turn_severities
from eval_pipeline.run.pipeline import LaneRun, evaluate_lane
from eval_pipeline.runtimes import build_runtime
from eval_pipeline.viewer.export import export_report
from eval_pipeline.viewer.pages import PREVIEW_CHARS

from .conftest import LANE, SPLIT, StoredRun, manifest, record_run
from .viewer_server import get, serving

CASE = "fluency_truth_001"  # fails in a no-gloss run
# About 3.4 MB of UTF-8: markup, an ampersand, characters of two, three and four bytes, lines.
LONG_SURFACE = "".join(f"<b>line {i}</b> & é ≠ 👍 {'x' * (i % 7)}\n" for i in range(100_000))
LONG_PROMPT = "Why? " * 300_000
LONG = StoredRun("run-long", "long", "2024-03-03", False)
WARM = "warmed_session_consistency"
PAGE_BOUND = 200_000  # characters: fifty failing rows of previews, and the rest of a page


def answering(run: LaneRun, case_id: str, surface: str, prompt: str) -> LaneRun:
    """``run`` with ``case_id``'s every surface and prompt replaced (what a runtime and a case file could hold)."""
    transcripts = run.transcripts.copy()
    transcripts.loc[transcripts["case_id"] == case_id, "surface"] = surface
    transcripts.loc[transcripts["case_id"] == case_id, "prompt"] = prompt
    return dataclasses.replace(run, transcripts=transcripts)


def fetch(url: str) -> tuple[int, bytes, dict[str, str]]:
    """Status, body (bytes) and headers of a GET."""
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return int(response.status), response.read(), dict(response.headers)
    except urllib.error.HTTPError as error:
        return int(error.code), error.read(), dict(error.headers)


def full_text_links(page: str) -> list[tuple[int, str]]:
    """Each '… (N more characters) full text' of a page: N, and the link's address."""
    return [
        (int(more), html.unescape(href))
        for more, href in re.findall(r"… \((\d+) more characters\) <a href=\"([^\"]+)\">full text</a>", page)
    ]


@pytest.fixture
def viewer(history: str, lane_runs: dict[bool, LaneRun]) -> Iterator[str]:
    """The fixture history plus a run whose failing case answered 3.4 MB to a 1.5 MB prompt, served."""
    record_run(history, answering(lane_runs[False], CASE, LONG_SURFACE, LONG_PROMPT), LONG)
    with serving(history) as url:
        yield url


def test_a_long_surface_is_cut_on_every_page_and_linked_whole(viewer: str) -> None:
    surface_more, prompt_more = len(LONG_SURFACE) - PREVIEW_CHARS, len(LONG_PROMPT) - PREVIEW_CHARS
    pages = {
        "run": f"/runs/{LONG.run_id}",
        "case": f"/runs/{LONG.run_id}/cases/{CASE}",
        "grid": f"/lanes/{LANE}/grid?split={SPLIT}",
        "search": f"/lanes/{LANE}/grid?split={SPLIT}&q=line+99999",
        "compare": f"/compare?a=run-r2&b={LONG.run_id}",
    }
    for name, path in pages.items():
        status, page = get(viewer + path)
        assert status == 200 and len(page) < PAGE_BOUND, (name, len(page))
        assert html.escape(LONG_SURFACE[:PREVIEW_CHARS], quote=False) in page, name
        assert f"… ({surface_more} more characters)" in page, name
    # The compare page's diff links to the case page, which links each text whole.
    _, compare = get(viewer + pages["compare"])
    assert (
        f'… ({surface_more} more characters) <a href="/runs/{LONG.run_id}/cases/{CASE}">the case page</a>'
        in (compare)
    )

    _, case = get(viewer + pages["case"])
    links = full_text_links(case)
    assert {more for more, _ in links} == {surface_more, prompt_more}
    for more, link in links:
        status, body, headers = fetch(viewer + link)
        whole = LONG_SURFACE if more == surface_more else LONG_PROMPT
        assert status == 200 and body == whole.encode("utf-8"), link
        assert headers["content-type"] == "text/plain; charset=utf-8"
        assert headers["x-content-type-options"] == "nosniff"
        assert "default-src 'none'" in headers["content-security-policy"]
    # The run page and the grid link the same text: the case's last surface.
    last_surface = max(link for more, link in links if more == surface_more)
    for name in ("run", "grid"):
        _, page = get(viewer + pages[name])
        assert (surface_more, last_surface) in full_text_links(page), name


def test_the_text_route_refuses_what_names_no_text(viewer: str) -> None:
    base = f"{viewer}/runs/{LONG.run_id}/text?lane={LANE}&split={SPLIT}&runtime=long&case_set={SPLIT}"
    status, body, _ = fetch(f"{base}&case={CASE}&turn=0")
    assert status == 200 and body == LONG_SURFACE.encode("utf-8")
    for query, code, says in (
        (f"&case={CASE}&turn=7", 404, f"no surface of turn 7 of sample 0 of case &#39;{CASE}&#39;"),
        ("&case=nope&turn=0", 404, "no surface of turn 0"),
        (
            f"&case={CASE}&turn=0&field=error",
            400,
            "field must be one of surface, prompt, got &#39;error&#39;",
        ),
        (f"&case={CASE}&turn=0&field=surface%20FROM%20x--", 400, "field must be one of surface, prompt"),
        (f"&case={CASE}", 400, "the query parameter &#39;turn&#39; is required"),
        (f"&case={CASE}&turn=-1", 400, "turn must be a whole number from 0"),
        (f"&case={CASE}&turn=0&sample=99999999999999999999", 400, "sample must be a whole number from 0"),
        ("&turn=0", 400, "the query parameter &#39;case&#39; is required"),
    ):
        status, body, headers = fetch(base + query)
        assert status == code and says in body.decode("utf-8"), (query, body[:300])
        assert headers["content-type"].startswith("text/html")
    status, body, _ = fetch(
        f"{viewer}/runs/nope/text?lane={LANE}&split={SPLIT}&runtime=long&case_set={SPLIT}&case={CASE}&turn=0"
    )
    assert status == 404


def test_the_static_report_cuts_long_surfaces_too(
    history: str, lane_runs: dict[bool, LaneRun], tmp_path: Path
) -> None:
    record_run(history, answering(lane_runs[False], CASE, LONG_SURFACE, LONG_PROMPT), LONG)
    index = export_report(history, tmp_path / "report")
    files = sorted(index.parent.rglob("*.html"))
    assert any(LONG.run_id in str(path) for path in files)
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert len(text) < PAGE_BOUND, (path, len(text))
    case = next(path for path in files if LONG.run_id in str(path) and CASE in path.name)
    assert f"… ({len(LONG_SURFACE) - PREVIEW_CHARS} more characters)</span>" in case.read_text(
        encoding="utf-8"
    )


def record_judged(root: str, run: LaneRun, stored: StoredRun) -> None:
    """``run`` stored and committed with its outcome's failing items (case rows, and the turn
    rows of cases judged per turn), as a pipeline run stores them."""
    spec = find_lane(stored.lane)
    failing = failing_items(
        failing_cases([run.case_predicates], 1),
        run.turn_predicates[run.turn_predicates["passed"] == False],  # noqa: E712 (nullable)
        turn_severities(spec.effective_thresholds, lane_kind(spec).metric_rows),
    )
    series = Series(stored.lane, stored.split, stored.runtime, stored.case_set)
    outcome = RunOutcome(series, stored.run_id, (), tuple(failing[0]), failing[1], failing[2])
    record_run(root, run, stored, commit=False)
    commit_run(
        root,
        manifest(stored).assign(outcome=outcome.to_json()),
        lane=stored.lane,
        date=stored.date,
        run_id=stored.run_id,
    )


def test_a_failing_turn_shows_that_turns_surface(history: str) -> None:
    """A case judged per turn fails at a turn: its row shows the surface of that turn (in the
    first sample where it failed), not the case's last surface."""
    warm = evaluate_lane(find_lane(WARM), SPLIT, build_runtime("reference:warm-drift"))
    record_judged(history, warm, StoredRun("run-w1", "reference-warm-drift", "2024-04-03", False, lane=WARM))
    with connect(history) as con:
        surfaces = {
            (str(case), int(turn)): str(surface)
            for case, turn, surface in con.execute(
                "SELECT case_id, turn_index, surface FROM transcripts WHERE run_id = 'run-w1' "
                "AND coalesce(sample_index, 0) = 0"
            ).fetchall()
        }
    last = {case: surfaces[(case, max(t for c, t in surfaces if c == case))] for case, _ in surfaces}
    with serving(history) as viewer:
        _, page = get(viewer + "/runs/run-w1")
    rows = re.findall(
        r'<tr><td class="\w+"><a href="[^"]+">(\w+)</a></td><td>turn (\d+)</td><td>\w+</td>'
        r'<td>\w+</td><td><code>[^<]*</code></td><td class="reason">[^<]*</td><td class="surface">([^<]*)</td></tr>',
        page,
    )
    assert len(rows) == int(warm.turn_predicates["passed"].eq(False).sum())
    for case, turn, shown in rows:
        assert html.unescape(shown) == surfaces[(case, int(turn))], (case, turn)
    # Some of them failed at a turn before the last, whose surface differs from the last one.
    assert any(surfaces[(case, int(turn))] != last[case] for case, turn, _ in rows)


def test_a_long_fault_reason_or_evidence_is_cut_too(history: str, lane_runs: dict[bool, LaneRun]) -> None:
    """What a runtime's reply or a predicate puts beside a surface (a fault message, a grounding
    source, a reason, evidence) is cut like a surface."""
    run = lane_runs[False]
    transcripts, verdicts = run.transcripts.copy(), run.case_predicates.copy()
    mine = transcripts["case_id"] == CASE
    transcripts.loc[mine, "error"] = "fault " * 500_000
    transcripts.loc[mine, "grounding_source"] = "source " * 200_000
    failing = (verdicts["case_id"] == CASE) & (verdicts["passed"] == False)  # noqa: E712 (nullable)
    verdicts.loc[failing, "message"] = "reason " * 300_000
    verdicts["evidence"] = verdicts["evidence"].astype(object)
    verdicts.loc[failing, "evidence"] = json.dumps({"found": ["evidence " * 300_000]})
    hostile = dataclasses.replace(run, transcripts=transcripts, case_predicates=verdicts)
    record_run(history, hostile, LONG)
    with serving(history) as viewer:
        for path, texts in (
            (f"/runs/{LONG.run_id}", ("fault ", "reason ")),
            (f"/runs/{LONG.run_id}/cases/{CASE}", ("fault ", "source ", "reason ", "evidence ")),
            (f"/lanes/{LANE}", ("reason ",)),
        ):
            status, page = get(viewer + path)
            assert status == 200 and len(page) < PAGE_BOUND, (path, len(page))
            for text in texts:
                assert text * 100 in page, (path, text)
            assert re.search(r"… \(\d{6,} more characters\)", page), path
