"""The stages of one lane evaluation as plain functions over cases and DataFrames.

Dagster assets call these one stage at a time; :func:`evaluate_lane` runs them all in one
process for tests and scripts. Both paths go through the same functions, so a lane scores
the same way wherever it runs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel

from eval_pipeline.cases.loading import LoadedCase, load_cases
from eval_pipeline.drive import TurnCallback, drive
from eval_pipeline.lanes.kind import LaneKind, Scored, Thread
from eval_pipeline.lanes.registry import lane_kind
from eval_pipeline.lanes.spec import LaneSpec
from eval_pipeline.memo import Recent
from eval_pipeline.runtimes.base import ChatRuntime
from eval_pipeline.samples import all_samples, per_sample, pool, rows_of_sample, sample_frames
from eval_pipeline.scoring import MetricValue, ThresholdVerdict, judge
from eval_pipeline.tables import CASE_PREDICATES, METRICS, TURN_PREDICATES, column_values, frame, lane_columns

CASES_COLUMNS = ["case_id", "split", "file", "line", "case_json"]


def case_paths(spec: LaneSpec, split: str, cases_path: str | Path | None = None) -> list[Path]:
    """The files a split evaluates: the lane's own, or one given file judged by the lane's contract."""
    return [Path(cases_path)] if cases_path else spec.case_files(split)


def load_split(spec: LaneSpec, split: str, cases_path: str | Path | None = None) -> list[LoadedCase[Any]]:
    """Validated cases of one split (raises CaseFileError listing every problem)."""
    return load_cases(case_paths(spec, split, cases_path), lane_kind(spec).case_model)


def cases_sha256(paths: Sequence[Path]) -> str:
    """Hash of the case files' bytes, in order: which cases a metric was measured on."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def cases_frame(loaded: Sequence[LoadedCase[Any]], split: str) -> pd.DataFrame:
    """Cases as a table: one row per case, the validated case as canonical JSON."""
    texts = [item.case.model_dump_json() for item in loaded]
    if loaded:  # the stages of this run read these cases back: they get these models
        _HYDRATED.put((type(loaded[0].case), _digest(texts)), [item.case for item in loaded])
    return pd.DataFrame(
        {
            "case_id": [str(item.case.id) for item in loaded],
            "split": [split] * len(loaded),
            "file": [item.file for item in loaded],
            "line": [item.line for item in loaded],
            "case_json": texts,
        },
        columns=CASES_COLUMNS,
    )


# Case models by (model, digest of the stored JSON): every stage of a run hydrates the same
# cases table, so its cases are validated once per run, not once per stage.
_HYDRATED: Recent[list[BaseModel]] = Recent(2)


def _digest(texts: Sequence[str]) -> bytes:
    digest = hashlib.blake2b(digest_size=16)
    for text in texts:
        digest.update(text.encode())
        digest.update(b"\n")
    return digest.digest()


def cases_from_frame(kind: LaneKind, cases: pd.DataFrame) -> list[BaseModel]:
    """The case models a cases table holds (already validated upstream; hydrated once per table)."""
    texts = column_values(cases, "case_json")
    model = kind.case_model
    return _HYDRATED.get((model, _digest(texts)), lambda: [model.model_validate_json(t) for t in texts])


def lane_threads(spec: LaneSpec, split: str, cases: Sequence[BaseModel]) -> list[Thread]:
    """The threads a lane sends for ``cases`` (what the transcripts stage drives), their ids checked."""
    threads = lane_kind(spec).threads(cases, spec, split)
    check_thread_ids(cases, threads)
    return threads


def check_thread_ids(cases: Sequence[BaseModel], threads: Sequence[Thread]) -> None:
    ids = {str(getattr(c, "id")) for c in cases}  # noqa: B009 - every case model has an id
    unknown = [t.case_id for t in threads if t.case_id not in ids]
    if unknown:
        raise ValueError(f"lane built threads for unknown cases: {unknown}")


def metric_rows(metrics: Sequence[MetricValue], verdicts: Sequence[ThresholdVerdict]) -> list[dict[str, Any]]:
    """Metric rows (lane columns of METRICS, without run metadata), with their verdicts."""
    by_metric = {v.threshold.metric: v for v in verdicts}
    rows: list[dict[str, Any]] = []
    for m in metrics:
        verdict = by_metric.get(m.metric)
        rows.append(
            {
                "metric": m.metric,
                "value": m.value,
                "numerator": m.numerator,
                "denominator": m.denominator,
                "threshold_op": verdict.threshold.op if verdict else None,
                "threshold": verdict.threshold.value if verdict else None,
                "severity": verdict.threshold.severity if verdict else None,
                "passed": verdict.passed if verdict else None,
                "verdict": verdict.word if verdict else "n/a",
                "samples": m.samples,
                "ci_low": m.interval[0] if m.interval else None,
                "ci_high": m.interval[1] if m.interval else None,
                "pass_hat_k": m.pass_hat_k,
                "statistic": verdict.statistic if verdict else None,
            }
        )
    return rows


@dataclass(frozen=True)
class LaneRun:
    """Every table one evaluation of a lane split produced (lane columns only)."""

    spec: LaneSpec
    split: str
    cases: pd.DataFrame
    transcripts: pd.DataFrame
    turn_predicates: pd.DataFrame
    case_predicates: pd.DataFrame
    metric_values: list[MetricValue]
    metrics: pd.DataFrame


def turn_predicate_table(
    kind: LaneKind, cases: Sequence[BaseModel], transcripts: pd.DataFrame
) -> pd.DataFrame:
    """Stage 3: per-turn verdicts (lane columns of TURN_PREDICATES), each sample scored on its own."""
    return per_sample(
        transcripts, lambda rows, _: kind.turn_predicates(cases, rows), lane_columns(TURN_PREDICATES)
    )


def case_predicate_table(
    kind: LaneKind, cases: Sequence[BaseModel], transcripts: pd.DataFrame, turn_predicates: pd.DataFrame
) -> pd.DataFrame:
    """Stage 4: per-case verdicts and assertion results (lane columns of CASE_PREDICATES), per sample."""
    return per_sample(
        transcripts,
        lambda rows, index: kind.case_predicates(cases, rows, rows_of_sample(turn_predicates, index)),
        lane_columns(CASE_PREDICATES),
    )


def metric_values(
    kind: LaneKind,
    cases: Sequence[BaseModel],
    transcripts: pd.DataFrame,
    turn_predicates: pd.DataFrame,
    case_predicates: pd.DataFrame,
) -> list[MetricValue]:
    """Stage 5: the lane's metrics plus the ones every lane emits (COMMON_METRICS: error_rate).

    With several samples per case each sample is measured on its own and the values pooled
    (:func:`eval_pipeline.samples.pool`); the all-samples tables give each metric's pass^k.
    """

    def measure(rows: pd.DataFrame, turns: pd.DataFrame, case_rows: pd.DataFrame) -> list[MetricValue]:
        return [*kind.metrics(Scored(cases, rows, turns, case_rows)), error_rate(rows)]

    samples = sample_frames(transcripts)
    per = [
        measure(rows, rows_of_sample(turn_predicates, index), rows_of_sample(case_predicates, index))
        for index, rows in samples
    ]
    if len(per) == 1:
        return per[0]
    every = measure(
        samples[0][1],
        all_samples(turn_predicates, ["case_id", "turn_index", "predicate"]),
        all_samples(case_predicates, ["case_id", "predicate"]),
    )
    return pool(per, every)


def score(
    kind: LaneKind, cases: Sequence[BaseModel], transcripts: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame, list[MetricValue]]:
    """Stages 3-5 in one call: turn predicates, case predicates and metric values."""
    turn_predicates = turn_predicate_table(kind, cases, transcripts)
    case_predicates = case_predicate_table(kind, cases, transcripts, turn_predicates)
    return (
        turn_predicates,
        case_predicates,
        metric_values(kind, cases, transcripts, turn_predicates, case_predicates),
    )


def error_rate(transcripts: pd.DataFrame) -> MetricValue:
    """Turns whose runtime call failed, over all turns. Every lane emits it."""
    faulted = transcripts["error"].notna()
    turns = len(transcripts)
    failing = tuple(sorted(set(transcripts.loc[faulted, "case_id"].astype(str))))
    value = float(faulted.sum()) / turns if turns else None
    return MetricValue("error_rate", value, float(faulted.sum()), float(turns), failing)


def evaluate_lane(
    spec: LaneSpec,
    split: str,
    runtime: ChatRuntime,
    *,
    cases_path: str | Path | None = None,
    concurrency: int = 1,
    on_turn: TurnCallback | None = None,
    repeat: int = 1,
    seed: int | None = None,
) -> LaneRun:
    """Run one lane split end to end in this process (no Dagster, no history)."""
    kind = lane_kind(spec)
    loaded = load_split(spec, split, cases_path)
    cases = [item.case for item in loaded]
    threads = kind.threads(cases, spec, split)
    check_thread_ids(cases, threads)
    transcripts = drive(runtime, threads, concurrency=concurrency, on_turn=on_turn, repeat=repeat, seed=seed)
    turn_predicates, case_predicates, values = score(kind, cases, transcripts)
    verdicts = judge(spec.effective_thresholds, values, max_error_rate=spec.max_error_rate)
    metrics = frame(METRICS, metric_rows(values, verdicts))[lane_columns(METRICS)]
    return LaneRun(
        spec,
        split,
        cases_frame(loaded, split),
        transcripts,
        turn_predicates,
        case_predicates,
        values,
        metrics,
    )
