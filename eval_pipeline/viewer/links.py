"""Where each viewer page lives: the paths the server answers and the files the static report
writes, built in one place so a link and the page it names can never drift apart.

The served paths are the viewer's interface (``/runs/<run_id>``, ``/runs/<run_id>/cases/<case_id>``,
``/runs/<run_id>/text?…`` (one transcript text in full), ``/series?…``, ``/lanes/<lane>/grid?split=S``,
``/compare?a=…&b=…``). The static report holds a subset of the pages (the lane overviews, the
latest runs and their cases) as files; a page it does not hold has no link (``None``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote, urlencode

from eval_pipeline.core import Series

VIEWER_URL_ENV = "EVAL_PIPELINE_VIEWER_URL"


def run_page_url(run_id: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The run's page in the viewer at ``$EVAL_PIPELINE_VIEWER_URL`` (in ``environ``, default the
    process's environment); None when it is not set."""
    base = viewer_base(environ)
    return None if base is None else base + SERVED.run(run_id)


def case_page_url(run_id: str, case_id: str) -> str | None:
    """One case's page (its transcript) in the viewer at ``$EVAL_PIPELINE_VIEWER_URL``, or None."""
    base = viewer_base()
    return None if base is None else base + SERVED.case(run_id, case_id)


def viewer_base(environ: Mapping[str, str] | None = None) -> str | None:
    """``$EVAL_PIPELINE_VIEWER_URL`` (in ``environ``, default the process's), where links to the
    served viewer point; None when it is not set."""
    base = (os.environ if environ is None else environ).get(VIEWER_URL_ENV, "").strip()
    return base.rstrip("/") or None


def _part(text: str) -> str:
    return quote(text, safe="")


TEXT_FIELDS = ("surface", "prompt")  # the transcript columns the text route serves


@dataclass(frozen=True)
class TextRef:
    """Where one transcript text is: the ``field`` (one of :data:`TEXT_FIELDS`) of a turn of a
    case's sample in a lane run."""

    run_id: str
    series: Series
    case_id: str
    sample: int
    turn: int
    field: str = "surface"

    def query(self) -> dict[str, str]:
        """The text route's query parameters (the run id is in its path)."""
        return {
            **self.series.columns(),
            "case": self.case_id,
            "sample": str(self.sample),
            "turn": str(self.turn),
            "field": self.field,
        }


@dataclass(frozen=True)
class Site:
    """Links between pages: the served viewer (``static=False``) or the static report's files,
    relative to the page being rendered (``up``: the folders between it and the report's root)."""

    static: bool = False
    up: str = ""

    def at(self, up: str) -> Site:
        """The same site, linked from a page ``up`` folders deep (``"../../"``)."""
        return Site(self.static, up)

    def home(self) -> str:
        return f"{self.up}index.html" if self.static else "/"

    def lane(self, lane: str) -> str:
        return f"{self.up}index.html#{_part(lane)}" if self.static else f"/lanes/{_part(lane)}"

    def run(self, run_id: str) -> str:
        return f"{self.up}{quote(run_file(run_id))}" if self.static else f"/runs/{_part(run_id)}"

    def case(self, run_id: str, case_id: str) -> str:
        if self.static:
            return f"{self.up}{quote(case_file(run_id, case_id))}"
        return f"/runs/{_part(run_id)}/cases/{_part(case_id)}"

    def series(self, series: Series) -> str | None:
        return None if self.static else "/series?" + urlencode(series.columns())

    def grid(self, lane: str, split: str, **filters: str) -> str | None:
        if self.static:
            return None
        query = urlencode({"split": split, **{k: v for k, v in filters.items() if v}})
        return f"/lanes/{_part(lane)}/grid?{query}"

    def compare(self, run_a: str, run_b: str) -> str | None:
        return None if self.static else "/compare?" + urlencode({"a": run_a, "b": run_b})

    def text(self, ref: TextRef) -> str | None:
        """One transcript text in full, as plain text; the static report holds none."""
        return None if self.static else f"/runs/{_part(ref.run_id)}/text?" + urlencode(ref.query())

    def page(self, path: str, number: int, **query: str) -> str | None:
        """Page ``number`` of a paginated served page; the static report has only the first."""
        if self.static:
            return None
        return f"{path}?" + urlencode({**{k: v for k, v in query.items() if v}, "page": str(number)})


SERVED = Site()
STATIC = Site(static=True)


def run_file(run_id: str) -> str:
    """A run page's file in the static report, relative to its root."""
    return f"runs/{_file_part(run_id)}/index.html"


def case_file(run_id: str, case_id: str) -> str:
    """A case page's file in the static report, relative to its root."""
    return f"runs/{_file_part(run_id)}/cases/{_file_part(case_id)}.html"


def _file_part(text: str) -> str:
    # A file name from any id: percent-encoded, so '/' or '..' never leave the folder; the
    # link quotes the '%' again, so a browser finds the file by that very name.
    name = quote(text, safe="-_.")
    return "%2E" + name[1:] if name.startswith(".") else name
