"""What failed, and why: the failing cases of a run and the faults of its turns, from its tables.

Pure functions over the stage tables (or their history rows). The CLI, the ``show`` command,
JUnit, the HTML report and the Dagster check metadata all render these, so a failing case
reads the same everywhere.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from eval_pipeline.collector import each_without_collector
from eval_pipeline.lanes.metric_rows import MetricRows
from eval_pipeline.runtimes.faults import split_call_ids
from eval_pipeline.samples import SAMPLE_INDEX, sample_count
from eval_pipeline.stage_files import StageFile, failed

# Hard (blocking) results first: they are what a reader acts on first.
_SEVERITY_ORDER = {"hard": 0, "error": 0, "ERROR": 0, "report": 1, "warn": 1, "WARN": 1}
BLOCKING_SEVERITIES = tuple(word for word, order in _SEVERITY_ORDER.items() if order == 0)
REPORT_SEVERITIES = tuple(word for word, order in _SEVERITY_ORDER.items() if order == 1)
FAILING_COLUMNS = ("case_id", "predicate", "severity", "code", "reason", "evidence")
# What the failing rows are read from in a case predicates stage file (not the run columns).
_ORDER_COLUMNS = ("case_id", "predicate", "passed", "severity", "code", SAMPLE_INDEX)
_LONG_COLUMNS = ("message", "evidence")


def evidence_object(value: Any) -> dict[str, Any]:
    """Evidence as a dict, whether stored as JSON text (any history file) or already decoded."""
    if isinstance(value, Mapping):
        return dict(value)
    if value is None or (not isinstance(value, str) and pd.isna(value)) or value == "":
        return {}
    try:
        decoded = json.loads(str(value))
    except ValueError:
        return {"text": str(value)}
    return decoded if isinstance(decoded, dict) else {"value": decoded}


def failing_cases(case_predicates: pd.DataFrame, samples: int | None = None) -> pd.DataFrame:
    """The failing case predicates (passed is False), hard first, then by case and predicate.

    Columns: case_id, predicate, severity, code, reason (the stored message), evidence (a dict).
    A run of several samples per case lists each failing case predicate once, from its first
    failing sample, its reason saying in how many samples it failed.
    """
    if case_predicates.empty:
        return pd.DataFrame(columns=list(FAILING_COLUMNS))
    return _as_failing(_failing_rows(case_predicates, samples))


def _failing_rows(case_predicates: pd.DataFrame, samples: int | None) -> pd.DataFrame:
    """The rows :func:`failing_cases` lists, in its order, as stored (evidence not decoded;
    ``_failed_in``: in how many of ``samples`` samples, when there are several). Reads no
    ``message`` or ``evidence``: only the rows shown need them."""
    failing = case_predicates[case_predicates["passed"].eq(False).fillna(False)].copy()
    failing["_order"] = failing["severity"].astype(str).map(_SEVERITY_ORDER).fillna(2).astype(int)
    samples = samples or sample_count(case_predicates)
    if samples > 1:
        failing = failing.sort_values(SAMPLE_INDEX, kind="stable")
        failed_in = failing.groupby(["case_id", "predicate"], sort=False)["passed"].transform("size")
        failing["_failed_in"] = [f"In {n} of {samples} samples: " for n in failed_in]
        failing = failing.drop_duplicates(["case_id", "predicate"])
    return failing.sort_values(["_order", "case_id", "predicate"], kind="stable")


def _as_failing(failing: pd.DataFrame) -> pd.DataFrame:
    reasons = failing["message"].astype(str)
    if "_failed_in" in failing:
        reasons = failing["_failed_in"] + reasons
    return pd.DataFrame(
        {
            "case_id": failing["case_id"].astype(str).tolist(),
            "predicate": failing["predicate"].astype(str).tolist(),
            "severity": failing["severity"].astype(str).tolist(),
            "code": failing["code"].astype(str).tolist(),
            "reason": reasons.tolist(),
            "evidence": [
                evidence_object(e) for e in failing.get("evidence", pd.Series([None] * len(failing)))
            ],
        },
        columns=list(FAILING_COLUMNS),
    )


@dataclass(frozen=True)
class FirstFailing:
    """The first failing case predicates of a run (in :func:`failing_cases` order) and how many
    there are in all: what a reader is shown, without holding every failing row of a big run."""

    rows: pd.DataFrame
    results: int
    cases: int


def first_failing(case_predicates: StageFile, limit: int, samples: int = 1) -> FirstFailing:
    """:func:`failing_cases` of a stage file, its first ``limit`` rows, read batch by batch
    (a case's rows and samples are all in its batch, so each batch's first rows suffice). The
    long columns (``message``, ``evidence``) are read only of the batches that hold a row shown."""
    heads: list[pd.DataFrame] = []
    results = cases = 0
    read = case_predicates.batches(_ORDER_COLUMNS, where=failed(), row_column="_row")
    for index, batch in enumerate(each_without_collector(read)):
        failing = _failing_rows(batch.assign(_batch=index), samples)
        results += len(failing)
        cases += failing["case_id"].nunique()
        heads.append(failing.head(limit))
    chosen = [head for head in heads if len(head)]
    if not chosen:
        return FirstFailing(pd.DataFrame(columns=list(FAILING_COLUMNS)), results, cases)
    rows = pd.concat(chosen, ignore_index=True)
    if len(heads) > 1:  # each batch is in order; together they are put in order again
        rows = rows.sort_values(["_order", "case_id", "predicate"], kind="stable")
    rows = rows.head(limit)
    long = {int(b): case_predicates.batch(int(b), list(_LONG_COLUMNS)) for b in rows["_batch"].unique()}
    for name in _LONG_COLUMNS:
        rows[name] = [
            long[int(b)][name].iloc[int(r)] for b, r in zip(rows["_batch"], rows["_row"], strict=True)
        ]
    return FirstFailing(_as_failing(rows), results, cases)


def failing_rows_for_metric(
    rows: MetricRows | None,
    case_ids: Iterable[str],
    case_predicates: pd.DataFrame,
    transcripts: pd.DataFrame,
    *,
    samples: int | None = None,
) -> pd.DataFrame:
    """Why each of a metric's failing cases counts against it.

    A rate shows the failing rows of the predicates its lane declares it counts (``rows``,
    :mod:`eval_pipeline.lanes.metric_rows`); another metric (``error_rate``) shows every
    failing row of the case, or the case's turn fault when it has no failing row.
    """
    ids = list(dict.fromkeys(str(c) for c in case_ids))
    # Narrow before building rows (their evidence is decoded): a big run has many failing rows.
    of_cases = (
        case_predicates[case_predicates["case_id"].isin(ids)] if len(case_predicates) else case_predicates
    )
    own = failing_cases(of_cases[rows.selects(of_cases)], samples) if rows is not None else None
    listed_rows = own if own is not None and not own.empty else failing_cases(of_cases, samples)
    listed = set(listed_rows["case_id"])
    faults = case_faults(transcripts)
    extra: list[dict[str, Any]] = [
        {
            "case_id": case_id,
            "predicate": "",
            "severity": "",
            "code": "turn_error" if case_id in faults else "",
            "reason": faults.get(case_id, "counts against the metric"),
            "evidence": {},
        }
        for case_id in ids
        if case_id not in listed
    ]
    return pd.concat([listed_rows, pd.DataFrame(extra, columns=list(FAILING_COLUMNS))], ignore_index=True)


def case_faults(transcripts: pd.DataFrame) -> dict[str, str]:
    """The first fault message of each case whose turns faulted."""
    if transcripts.empty or "error" not in transcripts:
        return {}
    faulted = transcripts[transcripts["error"].notna()]
    first: dict[str, str] = {}
    for case_id, error in zip(faulted["case_id"], faulted["error"], strict=True):
        first.setdefault(str(case_id), str(error))
    return first


CALL_IDS_SHOWN = 3  # call ids printed per fault; the rest are counted


def fault_counts(transcripts: pd.DataFrame) -> list[dict[str, Any]]:
    """The distinct faults of a run's turns with how many turns each, most common first.

    A fault is its message without the call ids a gateway adapter appends; each keeps every
    call id of its turns (``call_ids``, in turn order, each once)."""
    if transcripts.empty or "error" not in transcripts:
        return []
    counts: Counter[str] = Counter()
    ids: dict[str, dict[str, None]] = {}
    for error in transcripts["error"].dropna():
        fault, call_ids = split_call_ids(str(error))
        counts[fault] += 1
        ids.setdefault(fault, {}).update(dict.fromkeys(call_ids))
    return [
        {"turns": n, "fault": fault, "call_ids": list(ids[fault])}
        for fault, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]


def fault_text(fault: Mapping[str, Any]) -> str:
    """A :func:`fault_counts` entry as one line's text: the fault, then its first call ids and
    how many more."""
    call_ids: list[str] = fault.get("call_ids") or []
    if not call_ids:
        return str(fault["fault"])
    shown = ", ".join(call_ids[:CALL_IDS_SHOWN])
    more = f" and {len(call_ids) - CALL_IDS_SHOWN} more" if len(call_ids) > CALL_IDS_SHOWN else ""
    return f"{fault['fault']} [{shown}{more}]"


def last_surfaces(transcripts: pd.DataFrame) -> dict[str, str]:
    """Each case's last recorded surface (the one its case predicates mostly judge)."""
    if transcripts.empty:
        return {}
    ordered = transcripts.sort_values(["case_id", "turn_index"], kind="stable")
    last = ordered.groupby("case_id", sort=False).tail(1)
    return {
        str(c): "" if pd.isna(s) else str(s) for c, s in zip(last["case_id"], last["surface"], strict=True)
    }
