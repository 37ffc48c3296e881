"""``eval-pipeline view``'s web application: each route reads its page's data from history
(:mod:`eval_pipeline.viewer.pages`) and renders it (:mod:`eval_pipeline.viewer.render`).

Each request opens its own connection to the history views, so a page shows the runs committed
when it was asked for. A page shows a long transcript text cut (a
:class:`~eval_pipeline.viewer.pages.Preview`) and links to ``/runs/<run_id>/text?…``, which
serves that one text whole as plain text (never as HTML: ``nosniff``, and a policy that runs
nothing). What history does not hold is a 404 page that says what was not found and links
back; a malformed query parameter is a 400 page that says which; a history that cannot be read
(the store went away) is a 503 page saying why.

It answers only the host names it serves (:func:`served_hosts`): a request whose ``Host``
header names another is refused (400), so a page of another site whose name was pointed at
this address (DNS rebinding) cannot read history through the visitor's browser.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import duckdb
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from eval_pipeline.core import SERIES_COLUMN_NAMES, Series
from eval_pipeline.history.views import connect, reading_error
from eval_pipeline.viewer import pages
from eval_pipeline.viewer.links import SERVED, TextRef, viewer_base
from eval_pipeline.viewer.render import render

Page = Callable[[duckdb.DuckDBPyConnection, Request], str]
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
# A host name, an IPv4 or bracketed IPv6 address, "*.domain" (its subdomains) or "*" (any).
HOST_PATTERN = re.compile(r"\*|(\*\.)?[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\.?|\[[0-9A-Fa-f:.]+\]")
MAX_PAGE = 1_000_000_000  # a page's rows start at (page - 1) * rows: far inside a BIGINT offset
# A whole text is served as text a browser shows and never runs, whatever it holds.
TEXT_HEADERS = {"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "default-src 'none'; sandbox"}


def served_hosts(
    listen_host: str, extra: Sequence[str] = (), environ: Mapping[str, str] | None = None
) -> list[str]:
    """The ``Host`` names the viewer answers: the loopback names, the address it listens on, the
    host of ``$EVAL_PIPELINE_VIEWER_URL`` (where notifications link to) and ``extra`` (each a
    name, an address, ``*.domain`` or ``*``). ValueError names an ``extra`` that is none of these."""
    for name in extra:
        if not HOST_PATTERN.fullmatch(name):
            raise ValueError(
                f"--allowed-host {name!r}: expected a host name, an IP address ([...] for IPv6), "
                "*.domain or *"
            )
    try:
        linked = urlsplit(viewer_base(environ) or "").hostname or ""
    except ValueError:  # not a URL: no host to serve
        linked = ""
    named = [listen_host, linked, *extra]
    hosts = [*LOOPBACK_HOSTS, *(f"[{name}]" if ":" in name and "[" not in name else name for name in named)]
    return list(dict.fromkeys(host.lower() for host in hosts if host))


class _Pages:
    """The viewer's pages over the history at ``root``: each renders one template from one page
    function of :mod:`eval_pipeline.viewer.pages`."""

    def __init__(self, root: str) -> None:
        self.root = root

    def shown(self, con: duckdb.DuckDBPyConnection, template: str, **page: Any) -> str:
        return render(template, SERVED, runtime_specs=pages.runtime_specs(con), **page)

    def home(self, con: duckdb.DuckDBPyConnection, request: Request) -> str:
        return self.shown(
            con,
            "index.html",
            title="eval-pipeline view",
            home=pages.home(con),
            root=self.root,
            spark_runs=pages.SPARK_RUNS,
        )

    def lane(self, con: duckdb.DuckDBPyConnection, request: Request) -> str:
        name = request.path_params["lane"]
        reports = pages.lane_reports(con, name)
        return self.shown(con, "lanes.html", title=f"{name} · eval-pipeline", lanes=reports, root=self.root)

    def series(self, con: duckdb.DuckDBPyConnection, request: Request) -> str:
        asked = Series(*(_required(request, name) for name in SERIES_COLUMN_NAMES))
        page = pages.series_page(con, asked)
        return self.shown(
            con, "series.html", title=f"{asked.lane} · {asked.split} · {asked.runtime}", page=page
        )

    def run(self, con: duckdb.DuckDBPyConnection, request: Request) -> str:
        page = pages.run_page(con, request.path_params["run_id"], _page_number(request))
        return self.shown(con, "run.html", title=f"run {page.run_id}", page=page, path=request.url.path)

    def case(self, con: duckdb.DuckDBPyConnection, request: Request) -> str:
        run_id, case_id = request.path_params["run_id"], request.path_params["case_id"]
        cases = pages.case_pages(con, run_id, case_id)
        return self.shown(
            con,
            "case.html",
            title=f"{case_id} · run {run_id}",
            cases=cases,
            case_id=case_id,
            run_id=cases[0].ref.run_id,
        )

    def grid(self, con: duckdb.DuckDBPyConnection, request: Request) -> str:
        page = pages.grid_page(
            con,
            request.path_params["lane"],
            request.query_params.get("split") or None,
            filter=request.query_params.get("filter", ""),
            query=request.query_params.get("q", ""),
            predicate=request.query_params.get("predicate", ""),
            page=_page_number(request),
        )
        return self.shown(
            con, "grid.html", title=f"{page.lane} · {page.split} grid", page=page, path=request.url.path
        )

    def compare(self, con: duckdb.DuckDBPyConnection, request: Request) -> str:
        page = pages.compare_page(con, _required(request, "a"), _required(request, "b"))
        return self.shown(con, "compare.html", title=f"{page.run_a} against {page.run_b}", page=page)

    def text(self, con: duckdb.DuckDBPyConnection, request: Request) -> str:
        where = TextRef(
            request.path_params["run_id"],
            Series(*(_required(request, name) for name in SERIES_COLUMN_NAMES)),
            _required(request, "case"),
            _whole_number(request, "sample", "0"),
            _whole_number(request, "turn"),
            request.query_params.get("field", "surface"),
        )
        return pages.transcript_text(con, where)


def make_app(root: str, hosts: Sequence[str] = LOOPBACK_HOSTS) -> Starlette:
    """The viewer over the history at ``root`` (a folder or any fsspec URL), answering requests
    whose ``Host`` is one of ``hosts`` (see :func:`served_hosts`)."""

    def route(path: str, page: Page, answer: Callable[[str], Response] = HTMLResponse) -> Route:
        def endpoint(request: Request) -> Response:
            try:
                with connect(root) as con:
                    return answer(page(con, request))
            except pages.NotFound as exc:
                return _problem(404, "Not found", str(exc))
            except ValueError as exc:
                return _problem(400, "Bad request", str(exc))
            except (duckdb.Error, OSError) as exc:  # the store went away or denies a read
                return _problem(
                    503, "History unreadable", f"cannot read history {root!r}: {reading_error(exc)}"
                )

        return Route(path, endpoint)

    site = _Pages(root)
    return Starlette(
        routes=[
            route("/", site.home),
            route("/lanes/{lane}", site.lane),
            route("/lanes/{lane}/grid", site.grid),
            route("/series", site.series),
            route("/runs/{run_id}", site.run),
            route("/runs/{run_id}/cases/{case_id:path}", site.case),
            route("/runs/{run_id}/text", site.text, _whole_text),
            route("/compare", site.compare),
        ],
        exception_handlers={404: _no_such_page},
        middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=list(hosts), www_redirect=False)],
    )


def _problem(status: int, title: str, message: str) -> HTMLResponse:
    html = render("not_found.html", SERVED, title=title, message=message, back=SERVED.home())
    return HTMLResponse(html, status_code=status)


async def _no_such_page(request: Request, exc: Exception) -> HTMLResponse:
    return _problem(
        404, "Not found", f"no page {request.url.path!r}: the viewer's pages are listed on the home page"
    )


def _required(request: Request, name: str) -> str:
    value = request.query_params.get(name, "").strip()
    if not value:
        raise ValueError(f"the query parameter {name!r} is required")
    return value


def _whole_text(text: str) -> PlainTextResponse:
    return PlainTextResponse(text, headers=TEXT_HEADERS)


def _page_number(request: Request) -> int:
    return _whole_number(request, "page", "1", least=1)


def _whole_number(request: Request, name: str, default: str | None = None, *, least: int = 0) -> int:
    """The query parameter ``name`` (``default`` when absent; required when None), a whole number
    from ``least`` to :data:`MAX_PAGE`."""
    text = request.query_params.get(name, default)
    if text is None:
        raise ValueError(f"the query parameter {name!r} is required")
    # Checked as text first: a number past MAX_PAGE is an offset DuckDB cannot hold.
    if not (text.isascii() and text.isdigit() and len(text) <= len(str(MAX_PAGE))) or not (
        least <= int(text) <= MAX_PAGE
    ):
        shown = text if len(text) <= 40 else text[:39] + "…"
        raise ValueError(f"{name} must be a whole number from {least} to {MAX_PAGE}, got {shown!r}")
    return int(text)
