"""Verdicts as rows of the predicate tables, and back: one shape for every lane kind."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from eval_pipeline.predicates.base import Verdict


def evidence_json(evidence: Mapping[str, Any] | None) -> str:
    """Canonical JSON text for an evidence column (sorted keys: byte-stable across runs)."""
    if not evidence:  # most passing verdicts carry none: skip the encoder
        return "{}"
    return json.dumps(dict(evidence or {}), sort_keys=True, ensure_ascii=False, default=str)


def case_row(
    case_id: str,
    predicate: str,
    verdict: Verdict,
    *,
    severity: str,
    message: str,
    evidence: str | None = None,
) -> dict[str, Any]:
    """A row of CASE_PREDICATES (lane columns). ``evidence``: the verdict's evidence already
    encoded (a stored turn row's), so it is not decoded and encoded again."""
    return {
        "case_id": case_id,
        "predicate": predicate,
        "passed": verdict.passed,
        "severity": severity,
        "code": verdict.code,
        "message": message,
        "evidence": evidence if evidence is not None else evidence_json(verdict.evidence),
    }


def decoded_evidence(text: Any) -> dict[str, Any]:
    """An evidence column's JSON text as a dict (empty for null or ``{}``)."""
    if not isinstance(text, str) or not text or text == "{}":
        return {}
    value = json.loads(text)
    return value if isinstance(value, dict) else {}


class RowColumns:
    """Rows of a predicate table gathered column by column: a big run keeps lists of values,
    not a dict per row, until the table is built."""

    def __init__(self, names: Sequence[str]) -> None:
        self._columns: dict[str, list[Any]] = {name: [] for name in names}

    def add(self, row: Mapping[str, Any]) -> None:
        for name, values in self._columns.items():
            values.append(row[name])

    def extend(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for row in rows:
            self.add(row)

    @property
    def columns(self) -> dict[str, list[Any]]:
        return self._columns

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self._columns, columns=list(self._columns))
