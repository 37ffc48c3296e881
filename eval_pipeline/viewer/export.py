"""The static report: the viewer's pages rendered to files (see :mod:`eval_pipeline.history.report`).

Every page is rendered before the first file is written, so a history that cannot be read
leaves no half-written report behind.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from eval_pipeline.history.views import connect
from eval_pipeline.viewer import pages
from eval_pipeline.viewer.links import STATIC, case_file, run_file
from eval_pipeline.viewer.render import render

TITLE = "eval-pipeline history"


def export_report(root: str, out: Path) -> Path:
    """Write ``index.html`` (every lane's overview), the page of each series' latest run and a
    page per case of those runs under ``out``; return the path of ``index.html``."""
    files: dict[str, str] = {}
    with connect(root) as con:
        reports = pages.lane_reports(con)
        files["index.html"] = render("lanes.html", STATIC, title=TITLE, lanes=reports, root=root)
        run_ids = sorted({run.ref.run_id for report in reports for run in report.latest})
        for run_id in run_ids:
            page = pages.run_page(con, run_id)
            files[run_file(run_id)] = render(
                "run.html", STATIC.at("../../"), title=f"run {run_id}", page=page, path=""
            )
            for case_id in _case_ids(con, run_id):
                cases = pages.case_pages(con, run_id, case_id)
                files[case_file(run_id, case_id)] = render(
                    "case.html",
                    STATIC.at("../../../"),
                    title=f"{case_id} · run {run_id}",
                    cases=cases,
                    case_id=case_id,
                    run_id=run_id,
                )
    for name, html in files.items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(html, encoding="utf-8")
    return out / "index.html"


def _case_ids(con: duckdb.DuckDBPyConnection, run_id: str) -> list[str]:
    rows = con.execute(
        "SELECT DISTINCT case_id FROM case_predicates WHERE run_id = ? "
        "UNION SELECT DISTINCT case_id FROM transcripts WHERE run_id = ? ORDER BY 1",
        [run_id, run_id],
    ).fetchall()
    return [str(row[0]) for row in rows]
