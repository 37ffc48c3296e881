"""What failed, and why: the failing cases of a run and the faults of its turns, from its tables.

Pure functions over the stage tables (or their history rows). The CLI, the ``show`` command,
JUnit, the HTML report and the Dagster check metadata all render these, so a failing case
reads the same everywhere.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from eval_pipeline.core import each_without_collector
from eval_pipeline.metrics import SAMPLE_INDEX
from eval_pipeline.runtimes.faults import split_call_ids

# Hard (blocking) results first: they are what a reader acts on first.
_SEVERITY_ORDER = {"hard": 0, "error": 0, "ERROR": 0, "report": 1, "warn": 1, "WARN": 1}
BLOCKING_SEVERITIES = tuple(word for word, order in _SEVERITY_ORDER.items() if order == 0)
REPORT_SEVERITIES = tuple(word for word, order in _SEVERITY_ORDER.items() if order == 1)
FAILING_COLUMNS = ("case_id", "predicate", "severity", "code", "reason", "evidence")
# What failing_cases reads of every row: the failing rows, their order and their counts.
FAILING_READS = ("case_id", "predicate", "passed", "severity", "code", SAMPLE_INDEX)
_LONG_COLUMNS = ("message", "evidence")  # read of the rows shown only
_ORDER = ["_order", "case_id", "predicate"]


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


@dataclass(frozen=True)
class FirstFailing:
    """The first failing case predicates of a run (columns :data:`FAILING_COLUMNS`, in
    :func:`failing_cases` order) and how many there are in all: results and cases."""

    rows: pd.DataFrame
    results: int
    cases: int


def failing_cases(
    batches: Iterable[pd.DataFrame],
    samples: int,
    limit: int | None = None,
    read_long: Callable[[int, Sequence[str]], pd.DataFrame] | None = None,
) -> FirstFailing:
    """The failing case predicates (passed is False) of a run's case predicates given batch by
    batch, each case's rows and samples in one batch: hard first, then by case and predicate,
    the first ``limit`` of them (all without a limit) and how many there are in all.

    Rows: case_id, predicate, severity, code, reason (the stored message), evidence (a dict).
    A run of several ``samples`` per case lists each failing case predicate once, from its
    first failing sample, its reason saying in how many samples it failed.

    The batches hold :data:`FAILING_READS` and the long columns (``message``, ``evidence``);
    with ``read_long`` (a stage file's :meth:`~eval_pipeline.tables.stage_files.StageFile.batch`),
    :data:`FAILING_READS` alone, as :meth:`~eval_pipeline.tables.stage_files.StageFile.batches` gives
    them (a row's index is its place in its batch): the long columns are then read only of
    the batches that hold a row shown."""
    heads: list[pd.DataFrame] = []  # each batch's first rows, in order
    results = cases = 0
    for index, batch in enumerate(each_without_collector(batches)):
        if batch.empty:
            continue
        failing = _failing_rows(batch, samples).assign(_batch=index)
        results += len(failing)
        cases += failing["case_id"].nunique()
        if len(failing):
            heads.append(failing.iloc[:limit])
    if not heads:
        return FirstFailing(pd.DataFrame(columns=list(FAILING_COLUMNS)), results, cases)
    rows = heads[0] if len(heads) == 1 else pd.concat(heads).sort_values(_ORDER, kind="stable").iloc[:limit]
    if read_long is not None:
        long = {b: read_long(b, _LONG_COLUMNS) for b in rows["_batch"].unique().tolist()}
        at = list(zip(rows["_batch"].tolist(), rows.index.tolist(), strict=True))
        rows = rows.assign(**{name: [long[b][name].iloc[r] for b, r in at] for name in _LONG_COLUMNS})
    return FirstFailing(_as_failing(rows), results, cases)


def _failing_rows(case_predicates: pd.DataFrame, samples: int) -> pd.DataFrame:
    """The rows :func:`failing_cases` lists of one batch, in its order, as stored (evidence not
    decoded; ``_failed_in``: in how many of ``samples`` samples, when there are several), each
    keeping its index. Reads no ``message`` or ``evidence``: only the rows shown need them."""
    failing = case_predicates[case_predicates["passed"].eq(False).fillna(False)].copy()
    failing["_order"] = failing["severity"].astype(str).map(_SEVERITY_ORDER).fillna(2).astype(int)
    if samples > 1:
        failing = failing.sort_values(SAMPLE_INDEX, kind="stable")
        failed_in = failing.groupby(["case_id", "predicate"], sort=False)["passed"].transform("size")
        failing["_failed_in"] = [f"In {n} of {samples} samples: " for n in failed_in]
        failing = failing.drop_duplicates(["case_id", "predicate"])
    return failing.sort_values(_ORDER, kind="stable")


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
