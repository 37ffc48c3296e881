"""The static HTML report of the history: the viewer's pages written as files, by the viewer's
renderer (:mod:`eval_pipeline.viewer.render`), so it opens offline (inline SVG and CSS, no
script, no CDN) and reads like ``eval-pipeline view``.

``index.html`` is every lane's overview, leading with what failed: per lane, the latest run of
each series side by side, then per series its checks and its failing cases (reason and
surface), then every metric's trend with its threshold (a line per series,
:mod:`eval_pipeline.history.charts`), then the cases that flipped in each series' latest run.
Each series' latest run has its page (``runs/<run_id>/index.html``) and each of its cases its
transcript (``runs/<run_id>/cases/<case_id>.html``).

Every page is rendered before the first file is written, so a history that cannot be read
leaves no half-written report behind.
"""

from __future__ import annotations

from pathlib import Path

from eval_pipeline.history import connect
from eval_pipeline.viewer import pages
from eval_pipeline.viewer.links import STATIC, case_file, run_file
from eval_pipeline.viewer.render import render

TITLE = "eval-pipeline history"


def export_report(root: str, out: Path) -> Path:
    """Write ``index.html`` (every lane's overview), the page of each series' latest run and a
    page for each case those pages link to (the failing cases shown, the flipped cases) under
    ``out``; return the path of ``index.html``."""
    files: dict[str, str] = {}
    with connect(root) as con:
        reports = pages.lane_reports(con)
        specs = pages.runtime_specs(con)
        files["index.html"] = render(
            "lanes.html", STATIC, title=TITLE, lanes=reports, root=root, runtime_specs=specs
        )
        linked: dict[str, set[str]] = {}
        for report in reports:
            for run in report.latest:
                shown = linked.setdefault(run.ref.run_id, set())
                shown.update(row.case_id for row in run.failing)
                if run.diff is not None:
                    shown.update(str(case_id) for case_id in run.diff.flips["case_id"])
        for run_id, case_ids in sorted(linked.items()):
            page = pages.run_page(con, run_id)
            files[run_file(run_id)] = render(
                "run.html",
                STATIC.at("../../"),
                title=f"run {run_id}",
                page=page,
                path="",
                runtime_specs=specs,
            )
            case_ids.update(row.case_id for lane in page.lanes for row in lane.failing)
            for case_id, lane_cases in pages.cases_in_run(con, run_id, sorted(case_ids)).items():
                files[case_file(run_id, case_id)] = render(
                    "case.html",
                    STATIC.at("../../../"),
                    title=f"{case_id} · run {run_id}",
                    cases=lane_cases,
                    case_id=case_id,
                    run_id=run_id,
                    runtime_specs=specs,
                )
    for name, html in files.items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(html, encoding="utf-8")
    return out / "index.html"
