"""The CI summary: one GitHub-flavoured markdown document for a pull request or a job summary.

Pure rendering over :class:`LaneSummary` values: the verdict, each lane run's metrics beside
its baseline's (the series' previous run, or a run named with ``--baseline``) with the delta,
the failing cases and the faults. Every string that comes from a run (case ids, reasons,
fault messages, names) is escaped, so it reads as text: no table cell, code span, HTML or
line break of its own. The document fits GitHub's 65,536-character comment limit; past it,
it is cut at a line and says how many lines were left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from eval_pipeline.metrics import VERDICT_ORDER, number_text, worst_verdict
from eval_pipeline.report.markdown import escape_markdown, markdown_table

GITHUB_COMMENT_LIMIT = 65_536
FAILING_ROWS_SHOWN = 50  # per lane run


@dataclass(frozen=True)
class MetricLine:
    metric: str
    value: float | None
    baseline: float | None = None
    threshold: str = ""  # ">= 0.9 (ERROR)", or '' without one
    verdict: str = ""  # the check's word, or '' without one


@dataclass(frozen=True)
class LaneSummary:
    """One lane run as the summary shows it."""

    title: str  # lane/split [runtime] {case set}
    run_id: str
    verdict: str  # pass | warn | fail | void | error (the run broke)
    metrics: Sequence[MetricLine] = ()
    baseline_run_id: str | None = None
    failing_rows: Sequence[Mapping[Any, Any]] = ()  # case_id, turn, predicate, severity, reason
    failing_total: int = 0
    faults: Sequence[Mapping[str, Any]] = ()  # turns, fault
    notes: Sequence[str] = field(default_factory=tuple)  # the measurement note, a broken run's error


def overall_verdict(lanes: Sequence[LaneSummary]) -> str:
    return worst_verdict(lane.verdict for lane in lanes)


def _number(value: float | None) -> str:
    return "n/a" if value is None else number_text(value)


def _delta(line: MetricLine) -> str:
    if line.value is None or line.baseline is None:
        return ""
    delta = line.value - line.baseline
    return "0" if delta == 0 else f"{delta:+.4g}"


def _lane_lines(lane: LaneSummary) -> list[str]:
    title = escape_markdown(lane.title)
    lines = [f"### {title}: {lane.verdict}", ""]
    baseline = (
        escape_markdown(lane.baseline_run_id[:8])
        if lane.baseline_run_id
        else "none (first run of this series)"
    )
    lines += [f"run {escape_markdown(lane.run_id[:8])} · baseline {baseline}", ""]
    lines += [escape_markdown(note) for note in lane.notes] + ([""] if lane.notes else [])
    if lane.metrics:
        rows = [
            {
                "metric": m.metric,
                "value": _number(m.value),
                "baseline": "" if lane.baseline_run_id is None else _number(m.baseline),
                "delta": _delta(m),
                "threshold": m.threshold,
                "check": m.verdict,
            }
            for m in lane.metrics
        ]
        columns = ("metric", "value", "baseline", "delta", "threshold", "check")
        lines += [*markdown_table(rows, columns, limit=len(rows), more="metrics").splitlines(), ""]
    if lane.failing_rows:
        lines += [f"**Failing cases** ({lane.failing_total} result(s)):", ""]
        table = markdown_table(
            lane.failing_rows,
            # the turn, when a case judged per turn failed at one
            (
                "case_id",
                *(["turn"] if any(row.get("turn") for row in lane.failing_rows) else []),
                "predicate",
                "severity",
                "reason",
            ),
            limit=FAILING_ROWS_SHOWN,
            more="failing results (eval-pipeline show RUN lists them all)",
            total=lane.failing_total,
        )
        lines += [*table.splitlines(), ""]
    if lane.faults:
        total = sum(int(f["turns"]) for f in lane.faults)
        lines += [f"**Faults** ({total} turn(s)):", ""]
        table = markdown_table(
            lane.faults, ("turns", "fault"), limit=FAILING_ROWS_SHOWN, more="distinct faults"
        )
        lines += [*table.splitlines(), ""]
    return lines


def summary_markdown(lanes: Sequence[LaneSummary], *, limit: int = GITHUB_COMMENT_LIMIT) -> str:
    """The whole summary, at most ``limit`` characters."""
    verdict = overall_verdict(lanes)
    counts = {word: sum(lane.verdict == word for lane in lanes) for word in VERDICT_ORDER}
    tally = ", ".join(f"{n} {word}" for word, n in counts.items() if n)
    lines = [f"## eval-pipeline: {verdict}", "", f"{len(lanes)} lane run(s): {tally or 'none'}.", ""]
    overview = [{"lane run": lane.title, "verdict": lane.verdict, "run": lane.run_id[:8]} for lane in lanes]
    if overview:
        lines += [
            *markdown_table(
                overview, ("lane run", "verdict", "run"), limit=len(overview), more=""
            ).splitlines(),
            "",
        ]
    for lane in lanes:
        lines += _lane_lines(lane)
    return _within(lines, limit)


def _within(lines: list[str], limit: int) -> str:
    while lines and not lines[-1]:
        lines = lines[:-1]
    text = "\n".join(lines) + "\n"
    if len(text) <= limit:
        return text
    kept: list[str] = []
    size = 0
    reserve = 200  # room for the note that says what was cut
    for line in lines:
        if size + len(line) + 1 > limit - reserve:
            break
        kept.append(line)
        size += len(line) + 1
    left_out = len(lines) - len(kept)
    note = (
        f"\n…truncated: {left_out} more line(s) not shown (GitHub's limit is {GITHUB_COMMENT_LIMIT:,} "
        "characters); eval-pipeline show RUN lists every failing case."
    )
    return "\n".join(kept) + "\n" + note + "\n"  # the note's blank line sets it apart from a table
