"""The data each viewer page shows, read from history: plain values, no HTML.

Every function takes a connection with the history views (:func:`eval_pipeline.history.connect`)
and asks DuckDB for what its page shows only: a page of failing cases or of grid rows
(``LIMIT``/``OFFSET``, filters and search in the query), surfaces of the cases shown, fault
messages grouped in the query. Something the page names that history does not hold raises
:class:`NotFound`, whose message says what was not found. One module per page (or family).
"""

from eval_pipeline.viewer.pages.cases import CasePage, case_pages, cases_in_run, transcript_text
from eval_pipeline.viewer.pages.common import PREVIEW_CHARS, NotFound, Preview, day_text, runtime_specs
from eval_pipeline.viewer.pages.compare import ComparePage, LaneComparison, compare_page, word_diff
from eval_pipeline.viewer.pages.grid import GRID_FILTERS, GridPage, grid_page
from eval_pipeline.viewer.pages.overview import LaneReport, lane_reports
from eval_pipeline.viewer.pages.runs import Failing, RunPage, failing_of, run_page
from eval_pipeline.viewer.pages.series import SPARK_RUNS, Home, SeriesPage, home, series_page

__all__ = [
    "GRID_FILTERS",
    "PREVIEW_CHARS",
    "SPARK_RUNS",
    "CasePage",
    "ComparePage",
    "Failing",
    "GridPage",
    "Home",
    "LaneComparison",
    "LaneReport",
    "NotFound",
    "Preview",
    "RunPage",
    "SeriesPage",
    "case_pages",
    "cases_in_run",
    "compare_page",
    "day_text",
    "failing_of",
    "grid_page",
    "home",
    "lane_reports",
    "run_page",
    "runtime_specs",
    "series_page",
    "transcript_text",
    "word_diff",
]
