"""The stages of one lane evaluation, each a plain function from stage files to a stage file,
one case batch at a time (what a batch's turns and cases are scored with is above the line).

Dagster assets call these one stage at a time; :func:`evaluate_lane` runs them all in one
process for tests and scripts, over a scratch folder. There is one path: a lane scores the
same way wherever it runs.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pandas as pd
import pyarrow as pa
from pydantic import BaseModel

from eval_pipeline.cases import LoadedCase, load_cases
from eval_pipeline.cases.batch import CaseBatch
from eval_pipeline.core import collector_paused, each_without_collector
from eval_pipeline.lanes import LaneSpec, lane_kind
from eval_pipeline.lanes.kind import SCORED_COLUMNS, LaneKind, Scored, Thread, turn_requests, turns_of_threads
from eval_pipeline.lanes.kinds.framework_runner import FrameworkRunnerLane
from eval_pipeline.metrics import (
    SAMPLE_INDEX,
    USAGE_COLUMNS,
    MetricValue,
    ThresholdVerdict,
    all_samples,
    counts_added,
    failing_cases_of,
    judge,
    per_sample,
    pool,
    rows_of_sample,
    sample_frames,
    usage_metrics,
)
from eval_pipeline.predicates.telemetry import without_telemetry
from eval_pipeline.run.cases_stage import case_paths, write_cases
from eval_pipeline.run.drive import Books, Sending, answered_at_once, drive
from eval_pipeline.run.workers import close_workers, in_order, worker_count
from eval_pipeline.runtimes.base import ChatRuntime
from eval_pipeline.runtimes.unsupplied import kind_telemetry, unsupplied_predicates
from eval_pipeline.tables import (
    CASE_PREDICATES,
    METRICS,
    RUN_COLUMN_NAMES,
    TRANSCRIPTS,
    TURN_PREDICATES,
    StageFile,
    StageWriter,
    aligned_batch,
    aligned_count,
    column_values,
    frame,
    lane_columns,
    to_arrow,
)

if TYPE_CHECKING:
    from eval_pipeline.run.progress import ProgressObserver

T = TypeVar("T")


def load_split(spec: LaneSpec, split: str, cases_path: str | Path | None = None) -> list[LoadedCase[Any]]:
    """Validated cases of one split (raises CaseFileError listing every problem)."""
    return load_cases(case_paths(spec, split, cases_path), lane_kind(spec).case_model)


def cases_from_frame(kind: LaneKind, cases: pd.DataFrame) -> CaseBatch:
    """The case models a cases table holds (already validated upstream), hydrated when first read."""
    return CaseBatch(kind.case_model, column_values(cases, "case_id"), column_values(cases, "case_json"))


def cases_of_batch(kind: LaneKind, cases: StageFile, index: int, case_ids: pd.DataFrame) -> CaseBatch:
    """The cases of batch ``index`` of a cases stage file, given their ids (``case_ids``):
    their JSON is read from the file only when a stage first reads a field or a model."""
    return CaseBatch(
        kind.case_model,
        column_values(case_ids, "case_id"),
        lambda: column_values(cases.batch(index, ["case_json"]), "case_json"),
    )


def lane_threads(spec: LaneSpec, split: str, cases: Sequence[BaseModel]) -> list[Thread]:
    """The threads a lane sends for ``cases`` (what the transcripts stage drives), their ids checked."""
    threads = lane_kind(spec).threads(cases, spec, split)
    turns_of_threads(cases, threads)  # raises when a thread belongs to none of ``cases``
    return threads


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
                "passed": verdict.passed if verdict and verdict.word != "n/a" else None,
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
    kind: LaneKind,
    cases: Sequence[BaseModel],
    transcripts: pd.DataFrame,
    *,
    unsupplied: Mapping[str, Sequence[str]] | None = None,
) -> pd.DataFrame:
    """Stage 3: per-turn verdicts (lane columns of TURN_PREDICATES), each sample scored on its
    own; the rows of the ``unsupplied`` predicates (the run's :func:`telemetry_unsupplied`)
    not applicable."""
    table = per_sample(
        transcripts, lambda rows, _: kind.turn_predicates(cases, rows), lane_columns(TURN_PREDICATES)
    )
    return without_telemetry(table, unsupplied or {})


def case_predicate_table(
    kind: LaneKind,
    cases: Sequence[BaseModel],
    transcripts: pd.DataFrame,
    turn_predicates: pd.DataFrame,
    *,
    unsupplied: Mapping[str, Sequence[str]] | None = None,
) -> pd.DataFrame:
    """Stage 4: per-case verdicts and assertion results (lane columns of CASE_PREDICATES), per
    sample; the rows of the ``unsupplied`` predicates not applicable."""
    table = per_sample(
        transcripts,
        lambda rows, index: kind.case_predicates(cases, rows, rows_of_sample(turn_predicates, index)),
        lane_columns(CASE_PREDICATES),
    )
    return without_telemetry(table, unsupplied or {})


def telemetry_unsupplied(spec: LaneSpec, transcripts: StageFile) -> dict[str, tuple[str, ...]]:
    """The lane's predicates that read only telemetry the runtime supplied on no answered turn
    of the run (:func:`eval_pipeline.runtimes.unsupplied.unsupplied_predicates`), over every
    turn of the run at once: both scoring stages apply this one decision to every batch."""
    kind = lane_kind(spec)
    fields = list(kind_telemetry(kind))
    if not fields:
        return {}
    return unsupplied_predicates(kind, transcripts.read(["error", *fields]))


@dataclass(frozen=True)
class SampleMetrics:
    """A lane's metrics over some cases, before samples are pooled: each sample's values, and
    (with several samples) the values of the all-samples tables, which give pass^k."""

    per_sample: list[list[MetricValue]]
    all_samples: list[MetricValue] | None = None


def sample_metrics(
    kind: LaneKind,
    cases: Sequence[BaseModel],
    transcripts: pd.DataFrame,
    turn_predicates: pd.DataFrame,
    case_predicates: pd.DataFrame,
) -> SampleMetrics:
    """The lane's metrics plus the ones every lane emits (COMMON_METRICS: error_rate), per sample."""

    def measure(rows: pd.DataFrame, turns: pd.DataFrame, case_rows: pd.DataFrame) -> list[MetricValue]:
        return [*kind.metrics(Scored(cases, rows, turns, case_rows)), error_rate(rows)]

    samples = sample_frames(transcripts)
    per = [
        measure(rows, rows_of_sample(turn_predicates, index), rows_of_sample(case_predicates, index))
        for index, rows in samples
    ]
    if len(per) == 1:
        return SampleMetrics(per)
    every = measure(
        samples[0][1],
        all_samples(turn_predicates, ["case_id", "turn_index", "predicate"]),
        all_samples(case_predicates, ["case_id", "predicate"]),
    )
    return SampleMetrics(per, every)


def pooled(kind: LaneKind, measured: SampleMetrics) -> list[MetricValue]:
    """The metrics of a run: each sample's values pooled (:func:`eval_pipeline.metrics.samples.pool`)."""
    every = kind.derive_metrics(measured.all_samples) if measured.all_samples is not None else []
    return pool([kind.derive_metrics(values) for values in measured.per_sample], every)


def merge_batches(batches: Sequence[SampleMetrics]) -> SampleMetrics:
    """The metrics of several case batches as those of one: a rate's counts add up, so does a
    count; a metric derived from others (e.g. ``all_of``) is left for the kind to derive again.

    Exact: a case is scored from its own rows, so the counts of disjoint batches sum to the
    counts of their union."""
    if len(batches) == 1:
        return batches[0]
    samples = {len(b.per_sample) for b in batches}
    if len(samples) != 1:
        raise ValueError(f"case batches hold different numbers of samples: {sorted(samples)}")
    per = [_add([b.per_sample[i] for b in batches]) for i in range(samples.pop())]
    every = [b.all_samples for b in batches]
    return SampleMetrics(per, _add([e for e in every if e is not None]) if every[0] is not None else None)


def _add(batches: Sequence[Sequence[MetricValue]]) -> list[MetricValue]:
    added: list[MetricValue] = []
    for position, first in enumerate(batches[0]):
        values = [batch[position] for batch in batches]
        if any(v.metric != first.metric for v in values):
            raise ValueError(f"case batches emit metrics in different orders at {first.metric!r}")
        summed = counts_added(values)
        if summed is None:  # a count adds up; a derived metric is derived again from its added parts
            known = [v.value for v in values if v.value is not None]
            summed = MetricValue(
                first.metric, sum(known) if known else None, None, None, failing_cases_of(values)
            )
        added.append(summed)
    return added


def error_rate(transcripts: pd.DataFrame) -> MetricValue:
    """Turns whose runtime call failed, over all turns. Every lane emits it."""
    faulted = transcripts["error"].notna()
    turns = len(transcripts)
    failing = tuple(sorted(set(transcripts.loc[faulted, "case_id"].astype(str))))
    value = float(faulted.sum()) / turns if turns else None
    return MetricValue("error_rate", value, float(faulted.sum()), float(turns), failing)


# --- the stages over stage files, one case batch at a time (what the Dagster assets run) ------


@dataclass(frozen=True)
class StageOutput:
    """Where a stage writes its file (``folder``; None: the system's temporary folder) and the
    run columns each of its rows is stamped with (``run_columns``)."""

    run_columns: dict[str, str] = field(default_factory=dict)
    folder: str | Path | None = None


def drive_cases(
    spec: LaneSpec,
    split: str,
    cases: StageFile,
    runtime: ChatRuntime,
    sending: Sending | None = None,
    books: Books | None = None,
    *,
    progress: ProgressObserver | None = None,
    output: StageOutput = StageOutput(),
) -> StageFile:
    """Stage 2: the transcripts of every case batch, driven and written batch by batch, sent as
    ``sending`` says and kept in ``books`` (:func:`eval_pipeline.run.drive.drive`; None: their defaults).

    ``books.ledger`` answers, limits and keeps sessions; it is asked before the file is finished
    and raises when the run must not go on (a budget left sessions unsent), so no partial
    transcripts file is left. ``progress`` is told the turns to drive, then each turn.

    A lane whose threads share a session (a warm session plays every case) is driven in one
    piece, its rows then written in the cases' batches: the session cannot be cut. A recording
    answers each batch's turns at once (:func:`eval_pipeline.run.drive.answered_at_once`), session or not."""
    sending, books = sending or Sending(), books or Books()
    if progress is not None:
        progress.start(sending.repeat * int(cases.read(["turns"])["turns"].fillna(0).sum()))
    run_columns = output.run_columns
    with StageWriter(TRANSCRIPTS, output.folder) as writer:
        asked = partial(_by_batch, partial(_requests_of_batch, spec, split, cases), cases.batch_count)
        answered = answered_at_once(runtime, asked, sending, progress)
        if answered is not None:  # a recording: nothing is sent, each batch's turns are answered at once
            for table in answered:
                writer.write_table(table, **run_columns)
            return writer.finish()
        kind = lane_kind(spec)
        read = each_without_collector(cases.batches(["case_id", "case_json"]))
        batches = ((rows, cases_from_frame(kind, rows)) for rows in read)
        held: list[tuple[list[str], list[Thread]]] = []
        for case_rows, models in batches:
            threads = kind.threads(models, spec, split)
            if held or any(t.session is not None for t in threads):
                held.append((column_values(case_rows, "case_id"), threads))
                continue
            drive_threads = partial(_drive_piece, runtime, sending, books, progress)
            _drive_in_pieces(threads, drive_threads, writer, run_columns)
            writer.end_batch()
        if held:
            every = [t for _, threads in held for t in threads]
            rows = drive(runtime, every, sending, books, on_turn=progress)
            for case_ids, _ in held:
                writer.write(rows[rows["case_id"].isin(case_ids)], **run_columns)
        if books.ledger is not None:
            books.ledger.raise_if_stopped()
        return writer.finish()


# A batch's turns are driven a piece of whole cases at a time: the first piece this many turns,
# each next one as many as a quarter of the writer's text budget holds at the most bytes a turn
# has taken so far (at most PIECE_TURNS), so no batch's answers are held whole (the writer
# writes them a part at a time: eval_pipeline.tables.stage_files).
FIRST_PIECE_TURNS = 64
PIECE_TURNS = 2_000


def _drive_piece(
    runtime: ChatRuntime,
    sending: Sending,
    books: Books,
    progress: ProgressObserver | None,
    threads: list[Thread],
) -> pd.DataFrame:
    """One piece of a batch's threads driven (:func:`eval_pipeline.run.drive.drive`)."""
    return drive(runtime, threads, sending, books, on_turn=progress)


def _drive_in_pieces(
    threads: Sequence[Thread],
    drive_threads: Callable[[list[Thread]], pd.DataFrame],
    writer: StageWriter,
    run_columns: dict[str, str],
) -> None:
    """Drive ``threads`` (each case's threads sent by ``drive_threads``), in their order, and
    add their rows to ``writer``'s batch, a piece of whole cases at a time (see
    :data:`FIRST_PIECE_TURNS`)."""
    start, piece, per_turn = 0, FIRST_PIECE_TURNS, 1
    while start < len(threads):
        end, turns = start, 0
        while end < len(threads) and (turns < piece or threads[end].case_id == threads[end - 1].case_id):
            turns += len(threads[end].turns)
            end += 1
        per_turn = max(per_turn, writer.add(drive_threads(list(threads[start:end])), **run_columns))
        piece = max(1, min(PIECE_TURNS, writer.budget // (4 * per_turn)))
        start = end


def _requests_of_batch(spec: LaneSpec, split: str, cases: StageFile, index: int) -> pa.Table:
    """The turns the lane sends for case batch ``index`` (:func:`turn_requests`)."""
    with collector_paused():
        kind = lane_kind(spec)
        return turn_requests(
            kind, cases_from_frame(kind, cases.batch(index, ["case_id", "case_json"])), spec, split
        )


def score_turns(
    spec: LaneSpec,
    cases: StageFile,
    transcripts: StageFile,
    run_columns: dict[str, str] | None = None,
    folder: str | Path | None = None,
) -> StageFile:
    """Stage 3 over stage files: each batch's turn predicates."""
    score = partial(turn_predicate_table, unsupplied=telemetry_unsupplied(spec, transcripts))
    return _score_batches(spec, TURN_PREDICATES, score, [cases, transcripts], run_columns, folder)


def score_cases(
    spec: LaneSpec,
    cases: StageFile,
    transcripts: StageFile,
    turn_predicates: StageFile,
    run_columns: dict[str, str] | None = None,
    folder: str | Path | None = None,
) -> StageFile:
    """Stage 4 over stage files: each batch's case predicates."""
    inputs = [cases, transcripts, turn_predicates]
    score = partial(case_predicate_table, unsupplied=telemetry_unsupplied(spec, transcripts))
    return _score_batches(spec, CASE_PREDICATES, score, inputs, run_columns, folder)


# A stage of this many case batches or more is worked on by the worker processes, a batch
# each (starting them costs about a second of CPU each; a batch about a quarter of one).
PARALLEL_MIN_BATCHES = 4

# What a scoring stage computes of one batch: (kind, the batch's cases, its rows of each other input).
BatchScore = Callable[..., pd.DataFrame]


def _score_batches(
    spec: LaneSpec,
    schema: pa.Schema,
    score: BatchScore,
    inputs: Sequence[StageFile],
    run_columns: dict[str, str] | None,
    folder: str | Path | None,
) -> StageFile:
    """A stage file of ``score`` of each case batch of ``inputs`` (the cases first), batch by
    batch in order (:func:`_by_batch`). Of each input only what a stage function is given is
    read: the cases' ids (their JSON when a stage reads a field), the other tables' lane
    columns (as :func:`evaluate_lane` has them)."""
    columns = [["case_id"], *(_lane_columns_of(table) for table in inputs[1:])]
    lane = pa.schema([schema.field(name) for name in lane_columns(schema)])
    scored = partial(_scored_batch, spec, lane, score, inputs, columns)
    with StageWriter(schema, folder) as writer:
        for table in _by_batch(scored, aligned_count(*inputs)):
            writer.write_table(table, **(run_columns or {}))
        return writer.finish()


def _scored_batch(
    spec: LaneSpec,
    lane: pa.Schema,
    score: BatchScore,
    inputs: Sequence[StageFile],
    columns: Sequence[Sequence[str]],
    index: int,
) -> pa.Table:
    """Batch ``index`` of ``inputs`` scored, as rows of ``lane`` (the stage's lane columns: the
    run columns, one value each, are added as the batch is written, not sent by a worker)."""
    with collector_paused():
        kind = lane_kind(spec)
        if inputs[1].part_count(index) > 1:  # long transcripts: scored a part at a time
            parts = _batch_parts(kind, inputs, index, columns)
            return pa.concat_tables([to_arrow(lane, score(kind, *part)) for part in parts])
        case_ids, *tables = aligned_batch(inputs, index, columns)
        return to_arrow(lane, score(kind, cases_of_batch(kind, inputs[0], index, case_ids), *tables))


def _measured_batch(spec: LaneSpec, inputs: Sequence[StageFile], index: int) -> SampleMetrics:
    """Batch ``index`` measured: of the scored tables only what metrics read
    (:data:`SCORED_COLUMNS`), of the cases their ids (their JSON when the kind reads a field)."""
    tables = ("transcripts", "turn_predicates", "case_predicates")
    columns = [["case_id"], *([*SCORED_COLUMNS[t], SAMPLE_INDEX] for t in tables)]
    with collector_paused():
        kind = lane_kind(spec)
        if inputs[1].part_count(index) > 1:  # the parts' counts add up (merge_batches)
            return merge_batches(
                [sample_metrics(kind, *part) for part in _batch_parts(kind, inputs, index, columns)]
            )
        case_ids, *scored = aligned_batch(inputs, index, columns)
        return sample_metrics(kind, cases_of_batch(kind, inputs[0], index, case_ids), *scored)


def _batch_parts(
    kind: LaneKind, inputs: Sequence[StageFile], index: int, columns: Sequence[Sequence[str]]
) -> Iterator[tuple[Any, ...]]:
    """Batch ``index`` of ``inputs`` (the cases, the transcripts, then tables of verdicts) a
    transcripts part at a time (:meth:`StageFile.parts`: whole cases, a bounded text each):
    the part's cases, its transcript rows, and the other tables' rows of those cases (a few
    bytes a row: read once). A case without transcript rows goes with the last part."""
    cases = inputs[0].batch(index, ["case_id", "case_json"])
    others = [table.batch(index, names) for table, names in zip(inputs[2:], columns[2:], strict=True)]
    count, unseen = inputs[1].part_count(index), set(column_values(cases, "case_id"))
    for number, rows in enumerate(inputs[1].parts(index, columns[1])):
        held = set(column_values(rows, "case_id"))
        unseen -= held
        if number == count - 1:
            held |= unseen
        mine = [other[other["case_id"].isin(held)].reset_index(drop=True) for other in others]
        yield cases_from_frame(kind, cases[cases["case_id"].isin(held)]), rows, *mine


def _by_batch(work: Callable[[int], T], count: int) -> Iterator[T]:
    """``work`` of batches ``0 .. count - 1``, in order: by the worker processes when there are
    :data:`PARALLEL_MIN_BATCHES` or more and more than one worker (a few batches ahead of the
    one taken, so memory stays bounded by a few batches), else in this process."""
    workers = worker_count()
    if workers > 1 and count >= PARALLEL_MIN_BATCHES:
        return in_order((partial(work, index) for index in range(count)), workers, ahead=workers + 1)
    return each_without_collector(work(index) for index in range(count))


def _lane_columns_of(table: StageFile) -> list[str]:
    """The columns of a stage file but the run columns (which a stage writes, never reads)."""
    return [name for name in table.schema.names if name not in RUN_COLUMN_NAMES]


def measure(
    spec: LaneSpec,
    cases: StageFile,
    transcripts: StageFile,
    turn_predicates: StageFile,
    case_predicates: StageFile,
) -> list[MetricValue]:
    """Stage 5 over stage files: each batch measured, the batches added up, the samples pooled;
    then the usage metrics, over the usage columns of every turn (a percentile does not add up).
    The last stage the worker processes work on: they are stopped once the batches are measured
    (:mod:`eval_pipeline.run.workers`)."""
    inputs = [cases, transcripts, turn_predicates, case_predicates]
    batches = list(_by_batch(partial(_measured_batch, spec, inputs), aligned_count(*inputs)))
    close_workers()
    usage = usage_metrics(transcripts.read(list(USAGE_COLUMNS)))
    kind = lane_kind(spec)
    # A framework runner's own numbers come whole from its report, not from rows.
    reported = kind.reported(transcripts) if isinstance(kind, FrameworkRunnerLane) else []
    return [*pooled(kind, merge_batches(batches)), *reported, *usage]


def evaluate_lane(
    spec: LaneSpec,
    split: str,
    runtime: ChatRuntime,
    *,
    cases_path: str | Path | None = None,
    concurrency: int = 1,
    progress: ProgressObserver | None = None,
    repeat: int = 1,
    seed: int | None = None,
) -> LaneRun:
    """Run one lane split end to end in this process (no Dagster, no history): the stages the
    lane's assets run, over stage files in a scratch folder, each table read back whole."""
    # The run columns a stored table needs, read back without them: no run, no series.
    run = {"run_id": "", "lane": spec.name, "split": split, "runtime": runtime.spec, "case_set": split}
    with tempfile.TemporaryDirectory(prefix="eval-pipeline-lane-") as folder:
        cases = write_cases(spec, split, cases_path, folder)
        transcripts = drive_cases(
            spec,
            split,
            cases,
            runtime,
            Sending(concurrency=concurrency, repeat=repeat, seed=seed),
            progress=progress,
            output=StageOutput(run, folder),
        )
        turn_predicates = score_turns(spec, cases, transcripts, run, folder)
        case_predicates = score_cases(spec, cases, transcripts, turn_predicates, run, folder)
        values = measure(spec, cases, transcripts, turn_predicates, case_predicates)
        read = [t.read(_lane_columns_of(t)) for t in (cases, transcripts, turn_predicates, case_predicates)]
    verdicts = judge(spec.effective_thresholds, values, max_error_rate=spec.max_error_rate)
    metrics = frame(METRICS, metric_rows(values, verdicts))[lane_columns(METRICS)]
    return LaneRun(spec, split, read[0], read[1], read[2], read[3], values, metrics)
