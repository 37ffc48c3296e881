"""Two runs' verdicts paired, per common case: what a paired test of one rate reads.

A rate over cases pairs each case's verdicts (:func:`per_case_counts`, from the table
:func:`eval_pipeline.history.verdicts.side_by_side` makes). A rate over turns pairs turns:
:func:`paired_turns` joins both runs' turn verdicts on ``(case_id, sample_index, turn_index,
predicate)``, so only a turn both runs judged counts, and adds them up per case, because the
turns of one case (and its samples) are not independent: the bootstrap resamples whole cases.
A run's turn verdicts are history's ``turn_verdicts`` (:data:`eval_pipeline.tables.columns.TURN_VERDICTS`);
``error_rate``'s are its transcripts' ``error`` column (a fault fails the turn).
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np

from eval_pipeline.history.runs import RUN_MATCH, RunRef
from eval_pipeline.lanes.metric_rows import MetricRows

TURN_VERDICTS, TRANSCRIPTS = "turn_verdicts", "transcripts"
TURN_KEYS = "case_id, sample_index, turn_index, predicate"


@dataclass(frozen=True)
class CaseCounts:
    """Per common case (``case_ids``), what each side's rate counts out of its applicable verdicts."""

    case_ids: np.ndarray
    counted_a: np.ndarray
    applicable_a: np.ndarray
    counted_b: np.ndarray
    applicable_b: np.ndarray

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.counted_a, self.applicable_a, self.counted_b, self.applicable_b

    def applicable_on_both(self) -> CaseCounts:
        """The cases with a verdict on both sides: those a paired test reads."""
        both = (self.applicable_a > 0) & (self.applicable_b > 0)
        return CaseCounts(*(column[both] for column in (self.case_ids, *self.arrays())))

    @property
    def one_verdict_each(self) -> bool:
        """Every case holds one verdict a side: the 2×2 table (McNemar) applies."""
        return bool((self.applicable_a == 1).all() and (self.applicable_b == 1).all())

    def went_worse(self, higher_is_better: bool) -> list[str]:
        """The cases whose own rate moved the bad way (both sides applicable), sorted."""
        both = (self.applicable_a > 0) & (self.applicable_b > 0)
        a = self.counted_a * np.maximum(self.applicable_b, 1)  # rates compared without division
        b = self.counted_b * np.maximum(self.applicable_a, 1)
        worse = both & ((b < a) if higher_is_better else (b > a))
        return sorted(str(c) for c in self.case_ids[worse])


@dataclass(frozen=True)
class PairedTurns:
    """Per common case, the turns both runs judged: ``counts`` (what each side's rate counts of
    them; both sides' applicable counts are the paired turns) and the paired turns counted on
    one side only."""

    counts: CaseCounts
    counted_only_a: np.ndarray
    counted_only_b: np.ndarray

    @property
    def turns(self) -> int:
        return int(self.counts.applicable_a.sum())

    def went_worse(self, higher_is_better: bool) -> tuple[int, int, list[str]]:
        """The paired turns that went the bad way, those that went the good way, and the cases
        holding a turn that went the bad way (sorted)."""
        worse, better = (
            (self.counted_only_a, self.counted_only_b)
            if higher_is_better
            else (self.counted_only_b, self.counted_only_a)
        )
        cases = sorted(str(c) for c in self.counts.case_ids[worse > 0])
        return int(worse.sum()), int(better.sum()), cases


def per_case_counts(con: duckdb.DuckDBPyConnection, sides: str, rows: MetricRows) -> CaseCounts:
    """Per common case (both runs evaluated it), by case id, what each side's rate counts out of
    its applicable verdicts, from the :func:`eval_pipeline.history.verdicts.side_by_side` table
    ``sides``."""
    where, params = ["in_a AND in_b"], list[object]()
    if rows.predicates is not None:
        where.append("list_contains(?, predicate)")
        params.append(sorted(rows.predicates))
    if rows.severity is not None:
        where.append("severity = ?")
        params.append(rows.severity)
    sums = []
    for side in "ab":
        counted = f"samples_{side} - passes_{side}" if rows.counts_failures else f"passes_{side}"
        sums += [
            f"coalesce(sum({counted}), 0)::BIGINT AS counted_{side}",
            f"coalesce(sum(samples_{side}), 0)::BIGINT AS applicable_{side}",
        ]
    found = con.execute(
        f"SELECT case_id, {', '.join(sums)} FROM {sides} WHERE {' AND '.join(where)} "
        "GROUP BY case_id ORDER BY case_id",
        params,
    ).df()
    columns = (
        found[c].to_numpy(dtype=np.int64) for c in ("counted_a", "applicable_a", "counted_b", "applicable_b")
    )
    return CaseCounts(found["case_id"].astype(str).to_numpy(dtype=object), *columns)


def turn_source(rows: MetricRows) -> str:
    """The table a rate over turns reads: ``turn_verdicts``, or ``transcripts`` for the faults."""
    return TRANSCRIPTS if rows.source == "faults" else TURN_VERDICTS


def missing_turns_note(table: str, run_id: str) -> str:
    """Why a rate over turns is not tested: a run without the table it reads."""
    what = "turn verdicts" if table == TURN_VERDICTS else "transcripts"
    return f"not tested: no {what} in history for run {run_id}"


def holds_run(con: duckdb.DuckDBPyConnection, source: str, ref: RunRef) -> bool:
    """Whether ``source`` (a history view, or a registered current run) holds rows of ``ref``."""
    found = con.execute(f"SELECT 1 FROM {source} WHERE {RUN_MATCH} LIMIT 1", ref.params()).fetchone()
    return found is not None


def paired_turns(
    con: duckdb.DuckDBPyConnection,
    a: RunRef,
    b: RunRef,
    rows: MetricRows,
    *,
    source_a: str | None = None,
    source_b: str | None = None,
) -> PairedTurns:
    """Both runs' turns of one rate over turns, paired and added up per case (module
    docstring). ``source_a`` / ``source_b`` name where a run's rows are (default: the history
    view :func:`turn_source` names)."""
    table = turn_source(rows)
    side_a, params_a = _turn_rows(source_a or table, a, rows)
    side_b, params_b = _turn_rows(source_b or table, b, rows)
    found = con.execute(
        f"""WITH a AS ({side_a}), b AS ({side_b})
            SELECT case_id, count(*) AS turns,
                   count(*) FILTER (WHERE a.passed) AS passes_a,
                   count(*) FILTER (WHERE b.passed) AS passes_b,
                   count(*) FILTER (WHERE a.passed AND NOT b.passed) AS passed_only_a,
                   count(*) FILTER (WHERE b.passed AND NOT a.passed) AS passed_only_b
            FROM a JOIN b USING ({TURN_KEYS})
            GROUP BY case_id ORDER BY case_id""",
        [*params_a, *params_b],
    ).df()
    turns = found["turns"].to_numpy(dtype=np.int64)
    passes_a, passes_b = (found[f"passes_{s}"].to_numpy(dtype=np.int64) for s in "ab")
    only_a, only_b = (found[f"passed_only_{s}"].to_numpy(dtype=np.int64) for s in "ab")
    if rows.counts_failures:  # a failure counted on A only is a turn that passed on B only
        counted_a, counted_b, only_a, only_b = turns - passes_a, turns - passes_b, only_b, only_a
    else:
        counted_a, counted_b = passes_a, passes_b
    case_ids = found["case_id"].astype(str).to_numpy(dtype=object)
    return PairedTurns(CaseCounts(case_ids, counted_a, turns, counted_b, turns), only_a, only_b)


def _turn_rows(source: str, ref: RunRef, rows: MetricRows) -> tuple[str, list[object]]:
    """One run's applicable turn verdicts of the rate, one per key (a turn's verdict of a
    predicate is the AND of its rows), and the query's parameters."""
    params: list[object] = []
    if rows.source == "faults":
        verdict, predicate, where = "error IS NULL", "''", ""
    else:
        verdict, predicate, where = "passed", "predicate", " AND passed IS NOT NULL"
        if rows.predicates is not None:
            where += " AND list_contains(?, predicate)"
            params.append(sorted(rows.predicates))
    query = f"""SELECT case_id, coalesce(sample_index, 0) AS sample_index, turn_index,
                       {predicate} AS predicate, bool_and({verdict}) AS passed
                FROM {source} WHERE {RUN_MATCH}{where}
                GROUP BY ALL"""
    return query, [*ref.params(), *params]
