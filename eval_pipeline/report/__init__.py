"""A run's outcome rendered for the readers outside: JUnit (junit), the CI summary
(ci_summary), markdown tables (markdown) and the verdict colours (palette).

What other rooms use is exported here and loaded on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eval_pipeline.core.faces import lazy_exports

if TYPE_CHECKING:
    from eval_pipeline.report.ci_summary import FAILING_ROWS_SHOWN, LaneSummary, MetricLine, summary_markdown
    from eval_pipeline.report.junit import SuiteRun, junit_xml
    from eval_pipeline.report.markdown import markdown_table
    from eval_pipeline.report.palette import css_class, css_rules, rich_style

_EXPORTS: dict[str, str] = {
    "FAILING_ROWS_SHOWN": "ci_summary",
    "LaneSummary": "ci_summary",
    "MetricLine": "ci_summary",
    "SuiteRun": "junit",
    "css_class": "palette",
    "css_rules": "palette",
    "junit_xml": "junit",
    "markdown_table": "markdown",
    "rich_style": "palette",
    "summary_markdown": "ci_summary",
}
__all__ = [
    "FAILING_ROWS_SHOWN",
    "LaneSummary",
    "MetricLine",
    "SuiteRun",
    "css_class",
    "css_rules",
    "junit_xml",
    "markdown_table",
    "rich_style",
    "summary_markdown",
]

__getattr__ = lazy_exports(__name__, _EXPORTS)
