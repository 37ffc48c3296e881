"""HTML of every viewer page, from the page data of :mod:`eval_pipeline.viewer.pages`, through
one set of Jinja templates (``templates/``) that the server and the static report share.

Autoescaping is on for every template: a case id, a prompt or a surface is text wherever it
appears (``<script>`` in a surface reads as ``<script>``). No page loads a script, a font or a
style from anywhere: the CSS is inline, the charts are inline SVG.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cache
from typing import Any

import jinja2
import pandas as pd
from markupsafe import Markup

from eval_pipeline.history.charts import series_name
from eval_pipeline.history.runs import RunRef, is_missing
from eval_pipeline.history.svg import sparkline_svg
from eval_pipeline.metrics import number_text, usage_value_text
from eval_pipeline.report import css_class, css_rules
from eval_pipeline.viewer.links import Site
from eval_pipeline.viewer.pages import GRID_FILTERS, Preview, day_text


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("eval_pipeline.viewer", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = lambda value: "null" if value is None else number_text(float(value))
    env.filters["usage"] = lambda value, metric: usage_value_text(str(metric), value)
    env.filters["word"] = css_class
    env.filters["day"] = day_text
    env.filters["short"] = lambda run_id: str(run_id)[:8]
    env.filters["sparkline"] = lambda shares: Markup(sparkline_svg(shares))
    env.filters["records"] = records
    env.filters["preview"] = lambda text: None if text is None or is_missing(text) else Preview.of(str(text))
    env.filters["evidence"] = lambda value: json.dumps(value, ensure_ascii=False, indent=1)
    env.globals["series_name"] = run_series_name
    env.globals["verdict_css"] = css_rules()
    env.globals["grid_filters"] = GRID_FILTERS
    return env


def render(
    template: str, site: Site, *, title: str, runtime_specs: Mapping[str, str] | None = None, **page: Any
) -> str:
    """One page as an HTML document; ``site`` makes its links (served paths or report files);
    ``runtime_specs`` (:func:`eval_pipeline.viewer.pages.runtime_specs`) puts its spec beside
    each runtime target whose name is not its spec."""
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        environment()
        .get_template(template)
        .render(site=site, title=title, generated=generated, runtime_specs=runtime_specs or {}, **page)
    )


def run_series_name(ref: RunRef, *, with_lane: bool = False) -> str:
    """A run's series as headings name it: ``split · runtime`` (+ case set), the lane first if asked."""
    name = series_name(ref.split, ref.runtime, ref.case_set)
    return f"{ref.lane} · {name}" if with_lane else name


def records(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """A table's rows for a template: missing values (NULL, NaN) as None."""
    return [{str(k): None if is_missing(v) else v for k, v in row.items()} for row in rows.to_dict("records")]
