"""Messages rendered from an event: a Slack incoming-webhook payload (``text`` + Block Kit
``blocks``) and a generic JSON document. Pure: the CLI, the sensor and ``notify test`` send
exactly these."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eval_pipeline.notify.events import Event, FailingCase, regressed_metrics
from eval_pipeline.outcome import fault_text

SLACK_TEXT_LIMIT = 3000  # characters in one section's text (Block Kit)
SLACK_HEADER_LIMIT = 150  # characters in a header block's plain text
SLACK_BLOCK_LIMIT = 50
REASON_LIMIT = 300  # characters of one failing case's reason in a message
FAULTS_SHOWN, FAULT_LIMIT = 3, 600  # a void run's faults a message lists; characters of each
_ICON = {
    "check_failed": ":red_circle:",
    "regression": ":chart_with_downwards_trend:",
    "void": ":warning:",
    "stale": ":hourglass:",
    "recovered": ":large_green_circle:",
}


@dataclass(frozen=True)
class Links:
    """Where a reader goes next: the Dagster run page and the viewer's run page (when configured)."""

    dagster: str = ""
    viewer: str = ""

    @classmethod
    def for_run(cls, run_id: str, *, dagster_base: str, viewer: str) -> Links:
        """The links of one run: its Dagster run page under ``dagster_base``, and ``viewer``
        (the viewer's run page, :func:`eval_pipeline.viewer.links.run_page_url`)."""
        return cls(dagster=f"{dagster_base.rstrip('/')}/runs/{run_id}" if dagster_base else "", viewer=viewer)


def clipped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def slack_escape(text: str) -> str:
    """Text shown as itself in Slack mrkdwn: ``&``, ``<`` and ``>`` are its only control characters."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def check_lines(event: Event) -> list[str]:
    """One line per check the event is about: ``metric = value, needs >= 0.9 (ERROR)``."""
    lines = []
    for check in event.checks:
        if check.threshold is not None:
            value = "missing" if check.value is None else f"{check.value:.4g}"
            lines.append(f"{check.name} = {value}, needs {check.threshold} ({check.severity})")
        elif event.kind == "regression":
            metrics = ", ".join(regressed_metrics(check)) or "see the check"
            lines.append(f"{check.name}: {check.description} (metrics: {metrics})")
        else:
            lines.append(f"{check.name}: {check.description}")
    return lines


def shown_cases(event: Event) -> tuple[FailingCase, ...]:
    """The failing cases a message lists: those of a failed check or a regression (a void run's
    results are its faults' echoes; a recovery and a stale series have none to show)."""
    return event.run.failing_cases if event.kind in ("check_failed", "regression") else ()


def case_lines(event: Event) -> list[str]:
    """The first failing cases with their reasons, then how many more."""
    run = event.run
    cases = shown_cases(event)
    if not cases:
        return []
    lines = [f"{c.case_id} · {c.predicate}: {clipped(c.reason, REASON_LIMIT)}" for c in cases]
    more = run.failing_total - len(run.failing_cases)
    if more > 0:
        lines.append(f"…and {more} more: eval-pipeline show {run.run_id[:8]}")
    return lines


def fault_lines(event: Event) -> list[str]:
    """What made a void run void: its most common faults, each with how many turns it hit
    (a runner's failure: its traceback's last lines), then how many other faults there were."""
    faults = event.run.faults if event.kind == "void" else ()
    lines = [f"{f['turns']} turn(s): {clipped(fault_text(f), FAULT_LIMIT)}" for f in faults[:FAULTS_SHOWN]]
    if len(faults) > FAULTS_SHOWN:
        lines.append(
            f"…and {len(faults) - FAULTS_SHOWN} other fault(s): eval-pipeline show {event.run.run_id[:8]}"
        )
    return lines


def json_payload(event: Event, links: Links) -> dict[str, Any]:
    """The event as a document (the ``json`` channel format)."""
    run = event.run
    return {
        "event": event.kind,
        "severity": event.severity,
        "headline": event.headline,
        **run.series.columns(),
        "series": run.series.key,
        "run_id": run.run_id,
        "night": run.night,
        "checks": [
            {
                "name": c.name,
                "passed": c.passed,
                "severity": c.severity,
                "verdict": c.verdict,
                "value": c.value,
                "threshold": c.threshold,
                "description": c.description,
            }
            for c in event.checks
        ],
        "failing_cases": [
            {"case_id": c.case_id, "predicate": c.predicate, "reason": c.reason} for c in shown_cases(event)
        ],
        "failing_total": run.failing_total if shown_cases(event) else 0,
        "faults": fault_lines(event),
        "links": {"dagster_run": links.dagster or None, "viewer_run": links.viewer or None},
    }


def _section(lines: list[str]) -> dict[str, Any]:
    text = "\n".join(slack_escape(line) for line in lines)
    return {"type": "section", "text": {"type": "mrkdwn", "text": clipped(text, SLACK_TEXT_LIMIT)}}


def slack_payload(event: Event, links: Links) -> dict[str, Any]:
    """A Slack incoming-webhook message: ``text`` (the notification's fallback) and blocks
    within Block Kit's limits, whatever the run holds."""
    run = event.run
    blocks: list[dict[str, Any]] = [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": clipped(f"{event.kind}: {run.lane}", SLACK_HEADER_LIMIT)},
        },
        _section([event.headline, f"series {run.series.key} · night {run.night} · run {run.run_id[:8]}"]),
    ]
    if checks := check_lines(event):
        blocks.append(_section(checks))
    if event.kind == "void" and run.measurement_note:
        blocks.append(_section([run.measurement_note, *fault_lines(event)]))
    if cases := case_lines(event):
        blocks.append(_section([f"failing cases ({run.failing_total} result(s)):", *cases]))
    linked = [
        f"<{url}|{name}>" for name, url in (("Dagster run", links.dagster), ("viewer", links.viewer)) if url
    ]
    if linked:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": " · ".join(linked)}]})
    text = clipped(f"{_ICON[event.kind]} {slack_escape(event.headline)}", SLACK_TEXT_LIMIT)
    return {"text": text, "blocks": blocks[:SLACK_BLOCK_LIMIT]}


def payload(format: str, event: Event, links: Links) -> Mapping[str, Any]:
    """The payload of ``format`` (``slack`` or ``json``)."""
    return slack_payload(event, links) if format == "slack" else json_payload(event, links)
