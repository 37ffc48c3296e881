"""The viewer over history: page data (``pages``), one renderer (``render``, Jinja templates), the
web application of ``eval-pipeline view`` (``server``), the static report (``export``) and the
links to its pages (``links``: ``run_page_url`` for the Dagster metadata)."""

from eval_pipeline.viewer.links import VIEWER_URL_ENV, case_page_url, run_page_url

__all__ = ["VIEWER_URL_ENV", "case_page_url", "run_page_url"]
