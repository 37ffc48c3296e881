"""Predicates a run cannot apply because the runtime supplied none of the telemetry they read.

A predicate declares the answer fields besides the surface it reads (``reads=``: runtime
telemetry such as ``grounding_source``). Against a runtime that supplied none of them on any
answered turn (a plain chat model), such a predicate says nothing about the runtime: each of
its rows reads not applicable, coded :data:`TELEMETRY_NOT_SUPPLIED`, and a metric over it is
missing. Which predicates those are is decided once per run
(``runtimes.unsupplied.unsupplied_predicates``) and applied here, to the rows as they are built.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

import pandas as pd

from eval_pipeline.predicates.base import PREDICATES, TELEMETRY_NOT_SUPPLIED, Verdict
from eval_pipeline.predicates.explain import reason
from eval_pipeline.predicates.rows import evidence_json


def not_supplied(predicates: Iterable[str], absent: Collection[str]) -> dict[str, tuple[str, ...]]:
    """Each of ``predicates`` that reads telemetry, all of it in ``absent`` (the fields the
    runtime never supplied) → the fields it reads, in ``predicates``' order. A predicate that
    reads one field the runtime supplied is judged as usual."""
    found: dict[str, tuple[str, ...]] = {}
    for name in dict.fromkeys(predicates):
        reads = PREDICATES.get(name).reads
        if reads and all(field in absent for field in reads):
            found[name] = reads
    return found


def not_supplied_verdict(predicate: str) -> Verdict:
    """The verdict of every row of ``predicate`` in a run whose runtime supplied none of the
    telemetry it reads."""
    return Verdict.not_applicable(TELEMETRY_NOT_SUPPLIED, unsupplied=list(PREDICATES.get(predicate).reads))


def without_telemetry(table: pd.DataFrame, unsupplied: Mapping[str, Collection[str]]) -> pd.DataFrame:
    """``table`` (turn or case predicate rows) with every row of the predicates in
    ``unsupplied`` not applicable (:func:`not_supplied_verdict`); a case table's ``message``
    says why. Other rows are left as they are."""
    if not unsupplied or table.empty:
        return table
    rows = table["predicate"].isin(list(unsupplied)).to_numpy(dtype=bool)
    if not rows.any():
        return table
    marked = table.copy()
    names = marked.loc[rows, "predicate"].astype(str)
    verdicts = {name: not_supplied_verdict(name) for name in unsupplied}
    passed = marked["passed"].astype(object)
    passed[rows] = None
    marked["passed"] = passed
    marked.loc[rows, "code"] = TELEMETRY_NOT_SUPPLIED
    marked.loc[rows, "evidence"] = names.map(lambda name: evidence_json(verdicts[name].evidence)).to_numpy()
    if "message" in marked.columns:
        marked.loc[rows, "message"] = names.map(lambda name: reason(name, verdicts[name])).to_numpy()
    return marked
