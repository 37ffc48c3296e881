"""One lane run's tables, from the instance's stage files or from history, and how ``show``
prints them: the failing cases with their reasons and faults, or one case's whole transcript
with each turn's verdicts."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd
from rich.text import Text

from eval_pipeline.cli.common import out, run_title, short_id
from eval_pipeline.core import Series
from eval_pipeline.dagster_wiring import ensure_instance
from eval_pipeline.dagster_wiring.stored_runs import StoredRun, stored_runs
from eval_pipeline.history import connect
from eval_pipeline.history.runs import RUN_MATCH, RunRef, find_runs, is_missing
from eval_pipeline.metrics import rows_of_sample, sample_frames
from eval_pipeline.outcome import RunOutcome, committed_outcome, evidence_object, fault_counts, fault_text
from eval_pipeline.report import rich_style
from eval_pipeline.tables import OUTCOME_ATTR
from eval_pipeline.viewer.pages.common import decoded_names


@dataclass(frozen=True)
class RunTables:
    """One lane run's tables, from the instance's stage files or from history."""

    run_id: str
    title: str
    case_predicates: pd.DataFrame
    transcripts: pd.DataFrame
    turn_predicates: pd.DataFrame | None  # history keeps their verdicts only (no code, no evidence)
    outcome: RunOutcome | None  # as the run stored it (None: it broke before it was judged)
    runtime: str = ""
    stands_for: str | None = None  # what a derived runtime name stands for, as history knows it

    def has_case(self, case_id: str) -> bool:
        """Whether the run evaluated ``case_id`` (a case judged per turn has no case rows)."""
        return any(
            not table.empty and bool((table["case_id"] == case_id).any())
            for table in (self.case_predicates, self.transcripts)
        )


def _from_instance(prefix: str, root: str) -> list[RunTables]:
    tables_dir = Path(ensure_instance().storage_directory()) / "tables"
    runs = []
    for run in stored_runs(tables_dir, prefix):
        case_predicates = run.table("case_predicates")
        if case_predicates is None:
            continue
        transcripts = run.table("transcripts")
        split = _split_of(case_predicates, run.case_set)
        runs.append(
            RunTables(
                run.run_id,
                run_title(run.lane, split, run.runtime, run.case_set),
                case_predicates,
                transcripts if transcripts is not None else pd.DataFrame(),
                run.table("turn_predicates"),
                _outcome_of(run, root, Series(run.lane, split, run.runtime, run.case_set)),
                run.runtime,
            )
        )
    return _decoded(runs, root) if runs else runs


def _outcome_of(run: StoredRun, root: str, series: Series) -> RunOutcome | None:
    """A stored run's outcome: as history committed it, else as its metrics step judged it
    (a run that has not reached history), else None (it broke before it was judged)."""
    with connect(root, lane=run.lane) as con:
        committed = committed_outcome(con, RunRef(run.run_id, series))
    if committed is not None:
        return committed
    metrics = run.table("metrics")
    judged = None if metrics is None else metrics.attrs.get(OUTCOME_ATTR)
    return None if judged is None else RunOutcome.from_json(judged)


def _split_of(case_predicates: pd.DataFrame, case_set: str) -> str:
    """The split a stored run ran (its rows carry it; a run without rows: its case set)."""
    splits = case_predicates["split"].dropna() if "split" in case_predicates else pd.Series()
    return str(splits.iloc[0]) if len(splits) else case_set


def _from_history(prefix: str, root: str) -> list[RunTables]:
    with connect(root) as con:
        try:
            refs = find_runs(con, prefix)
        except KeyError:
            return []
        decoded = decoded_names(con, [ref.runtime for ref in refs])
        return [
            RunTables(
                ref.run_id,
                run_title(ref.lane, ref.split, ref.runtime, ref.case_set),
                con.execute(f"SELECT * FROM case_predicates WHERE {RUN_MATCH}", ref.params()).df(),
                con.execute(
                    f"SELECT * FROM transcripts WHERE {RUN_MATCH} ORDER BY case_id, turn_index", ref.params()
                ).df(),
                con.execute(f"SELECT * FROM turn_verdicts WHERE {RUN_MATCH}", ref.params()).df(),
                committed_outcome(con, ref),
                ref.runtime,
                decoded.get(ref.runtime),
            )
            for ref in refs
        ]


def _decoded(runs: list[RunTables], root: str) -> list[RunTables]:
    """``runs`` (from the instance's files) with what their derived runtime names stand for,
    as history knows them (a run that never reached history may share its name with one that did)."""
    with connect(root) as con:
        decoded = decoded_names(con, [r.runtime for r in runs])
    return [replace(r, stands_for=decoded.get(r.runtime)) for r in runs]


def find_run_tables(prefix: str, root: str) -> list[RunTables]:
    """The lane runs of the one run id ``prefix`` names: the instance's files first (they hold
    every stage, and runs that broke before history), else history. KeyError if none or several."""
    runs = _from_instance(prefix, root) or _from_history(prefix, root)
    ids = sorted({r.run_id for r in runs})
    if not ids:
        raise KeyError(f"no run {prefix!r} in this instance or in history at {root}")
    if len(ids) > 1:
        raise KeyError(
            f"run id prefix {prefix!r} is ambiguous: {', '.join(short_id(i) + '…' for i in ids[:5])}"
        )
    return runs


def print_failing(run: RunTables) -> None:
    """The run's failing items (cases, and the turns of cases judged per turn) with their
    reasons, and its faults: as its outcome holds them."""
    console = out()
    console.print(Text(f"{run.title} · run {run.run_id}", style="bold"))
    _print_runtime(run)
    outcome = run.outcome
    if outcome is None:
        console.print(Text("  not judged: the run broke before its metrics step", style=rich_style("void")))
        faults = fault_counts(run.transcripts)
    else:
        console.print(Text.assemble("  verdict ", (outcome.verdict, rich_style(outcome.verdict))))
        if outcome.void:
            console.print(Text(f"  {outcome.void_reason}"), highlight=False)
        if not outcome.failing_results:
            console.print(Text("  no failing case", style=rich_style("pass")))
        for item in outcome.failing:
            console.print(
                Text.assemble(
                    "  ",
                    (item.case_id, "bold" if item.severity == "hard" else ""),
                    f" · {item.where}" if item.where else "",
                    f" · {item.predicate} · {item.severity} · {item.code}",
                ),
                highlight=False,
            )
            console.print(Text(f"      {item.reason}"), highlight=False)
        if outcome.failing_results > len(outcome.failing):
            console.print(
                Text(
                    f"  …and {outcome.failing_results - len(outcome.failing)} more (eval-pipeline history --sql)"
                ),
                highlight=False,
            )
        faults = [dict(f) for f in outcome.faults]
    for fault in faults:
        console.print(Text(f"  fault, {fault['turns']} turn(s): {fault_text(fault)}"), highlight=False)


def print_case(run: RunTables, case_id: str) -> None:
    console = out()
    console.print(Text(f"{case_id} · {run.title} · run {run.run_id}", style="bold"))
    _print_runtime(run)
    turns = (
        run.transcripts[run.transcripts["case_id"] == case_id]
        if not run.transcripts.empty
        else run.transcripts
    )
    verdicts = run.turn_predicates
    samples = sample_frames(turns) if not turns.empty else []
    several = len(samples) > 1  # a run of N samples shows each sample's turns under its number
    for sample, rows in samples:
        for turn in rows.sort_values("turn_index").to_dict("records"):
            index = int(turn["turn_index"])
            label = f"turn {index} ({turn['role']})" + (f" · sample {sample}" if several else "")
            console.print(Text(label, style="bold"))
            console.print(Text(f"  prompt:  {turn['prompt']}"), highlight=False)
            if not is_missing(turn.get("error")):
                console.print(Text(f"  fault:   {turn['error']}", style=rich_style("void")), highlight=False)
            else:
                console.print(Text(f"  surface: {turn['surface']}"), highlight=False)
            if verdicts is None:
                continue
            of_sample = rows_of_sample(verdicts, sample)
            mine = of_sample[(of_sample["case_id"] == case_id) & (of_sample["turn_index"] == index)]
            for row in mine.to_dict("records"):
                word = _word(row["passed"])
                evidence = evidence_object(row.get("evidence"))
                detail = f" {json.dumps(evidence, ensure_ascii=False)}" if evidence and word == "fail" else ""
                code = f" [{row['code']}]" if not is_missing(row.get("code")) else ""
                console.print(
                    _verdict_line("    ", word, f" {row['predicate']}{code}{detail}"), highlight=False
                )
    console.print(Text("case verdicts", style="bold"))
    case_rows = run.case_predicates[run.case_predicates["case_id"] == case_id]
    if case_rows.empty:
        console.print(Text("  none: this lane judges the case per turn (above)"), highlight=False)
    for sample, rows in sample_frames(case_rows):
        prefix = f"  sample {sample}: " if several else "  "
        for row in rows.to_dict("records"):
            word = _word(row["passed"])
            console.print(
                _verdict_line(prefix, word, f" {row['predicate']} ({row['severity']}): {row['message']}"),
                highlight=False,
            )


def _print_runtime(run: RunTables) -> None:
    if run.stands_for is not None:  # a derived name says nothing of what it ran
        out().print(Text(f"  runtime {run.runtime}: {run.stands_for}"), highlight=False, soft_wrap=True)


def _word(passed: bool | None) -> str:
    return "n/a" if pd.isna(passed) else ("pass" if passed else "fail")


def _verdict_line(indent: str, word: str, text: str) -> Text:
    """A verdict word in its colour, then what it judged."""
    return Text.assemble(indent, (f"{word:<4}", rich_style(word)), text)
