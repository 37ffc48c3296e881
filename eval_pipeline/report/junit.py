"""JUnit XML for CI systems: one ``<testsuite>`` per lane run, one ``<testcase>`` per case.

A case with a failing hard (blocking) item of the run's outcome — a case row, or a turn of a
case judged per turn — is a ``<failure>`` carrying the reasons (naming the turn) and the
surface; so is a case a failed blocking check counts against; a case whose runtime call
faulted is an ``<error>`` (the run failed, not the model); report-severity findings go to
``<system-out>`` of a passing case. The lane run's
series, run id, measurement and threshold verdicts are ``<properties>``. The shape follows the
schema CI servers read (Jenkins, GitLab, GitHub reporters): ``tests``, ``failures``,
``errors``, ``skipped`` and ``time`` on every suite.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import pandas as pd

from eval_pipeline.outcome import HARD, FailingItem, case_faults, last_surfaces

# What XML 1.0 forbids (most C0 controls, U+FFFE, U+FFFF, surrogates); a surface may hold it.
_XML_ILLEGAL = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass(frozen=True)
class SuiteRun:
    """What one lane run contributes to the report."""

    name: str  # lane/split [runtime]
    run_id: str
    case_ids: Sequence[str]
    failing: Sequence[FailingItem]  # the run outcome's failing items
    blocked_case_ids: frozenset[str]  # the cases a failed blocking check counts against
    transcripts: pd.DataFrame
    properties: Mapping[str, str] = field(default_factory=dict)
    timestamp: datetime | None = None
    void_reason: str = ""  # non-empty: the run was void, every case is an error


def _text(value: object) -> str:
    return _XML_ILLEGAL.sub("", str(value))


def suite_element(run: SuiteRun) -> ET.Element:
    items: dict[str, list[FailingItem]] = {}
    for item in run.failing:
        items.setdefault(item.case_id, []).append(item)
    faults = case_faults(run.transcripts)
    surfaces = last_surfaces(run.transcripts)
    latency = (
        run.transcripts.groupby("case_id")["latency_ms"].sum(min_count=1)
        if not run.transcripts.empty
        else pd.Series(dtype=float)
    )
    suite = ET.Element("testsuite", name=_text(run.name))
    if run.timestamp is not None:
        suite.set("timestamp", run.timestamp.strftime("%Y-%m-%dT%H:%M:%S"))
    properties = ET.SubElement(suite, "properties")
    for key, value in {"run_id": run.run_id, **run.properties}.items():
        ET.SubElement(properties, "property", name=_text(key), value=_text(value))
    counts = {"failures": 0, "errors": 0}
    total_s = 0.0
    for case_id in run.case_ids:
        measured = latency.get(case_id)  # null: no call was timed (a recording answered)
        seconds = 0.0 if measured is None or pd.isna(measured) else float(measured) / 1000.0
        total_s += seconds
        case = ET.SubElement(suite, "testcase", name=_text(case_id), classname=_text(run.name))
        case.set("time", f"{seconds:.3f}")
        rows = items.get(case_id, [])
        hard = [item for item in rows if item.severity == HARD]
        surface = surfaces.get(case_id, "")
        if run.void_reason or case_id in faults:
            counts["errors"] += 1
            message = faults.get(case_id) or run.void_reason
            error = ET.SubElement(case, "error", message=_text(message), type="turn_error")
            error.text = _text(
                f"{message}\n({run.void_reason})"
                if run.void_reason and message != run.void_reason
                else message
            )
            continue  # its predicate results only echo the fault
        elif hard or case_id in run.blocked_case_ids:
            counts["failures"] += 1
            first = hard[0] if hard else None
            failure = ET.SubElement(
                case,
                "failure",
                message=_text(f"{first.predicate}: {first.text}" if first else "a blocking check counts it"),
                type=first.code if first else "check_failed",
            )
            lines = [f"{item.predicate} [{item.code}]: {item.text}" for item in hard]
            failure.text = _text("\n".join([*lines, "", "surface:", surface]))
        soft = [item for item in rows if item.severity != HARD]
        if soft:
            out = ET.SubElement(case, "system-out")
            out.text = _text(
                "\n".join(f"{item.severity}: {item.predicate} [{item.code}]: {item.text}" for item in soft)
            )
    suite.set("tests", str(len(run.case_ids)))
    suite.set("failures", str(counts["failures"]))
    suite.set("errors", str(counts["errors"]))
    suite.set("skipped", "0")
    suite.set("time", f"{total_s:.3f}")
    return suite


def junit_xml(runs: Sequence[SuiteRun], *, name: str = "eval-pipeline") -> str:
    """The whole document: ``<testsuites>`` with one suite per lane run, totals on the root."""
    root = ET.Element("testsuites", name=name)
    suites = [suite_element(run) for run in runs]
    for attribute in ("tests", "failures", "errors", "skipped"):
        root.set(attribute, str(sum(int(s.get(attribute, "0")) for s in suites)))
    root.set("time", f"{sum(float(s.get('time', '0')) for s in suites):.3f}")
    root.extend(suites)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
