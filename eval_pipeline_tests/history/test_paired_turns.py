"""Rates over turns and ``error_rate``, tested paired: ``compare`` and ``no_regression`` on the
turns both runs judged, clustered by case, over real Parquet history.

The thread-coherence lane's public split (6 threads, 58 turns) is evaluated with the reference
runtime; a later run's verdicts of chosen turns are then turned to failures, or its turns to
faults, as a runtime that got worse on them would have them, and both runs go through the store.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.core.series import Series
from eval_pipeline.dagster_wiring.launch import ensure_instance, materialize_lane
from eval_pipeline.history.regression import MetricFinding, find_regressions, regression_sentence
from eval_pipeline.history.store import append_run, run_file
from eval_pipeline.lanes import find_lane, lane_kind
from eval_pipeline.metrics.paired import paired_figures
from eval_pipeline.run.pipeline import LaneRun, error_rate, evaluate_lane
from eval_pipeline.runtimes import build_runtime
from eval_pipeline.runtimes.targets import find_target
from eval_pipeline.tables.columns import (
    CASE_PREDICATES,
    TRANSCRIPTS,
    TURN_PREDICATES,
    TURN_VERDICTS,
    nullable_types,
    to_arrow,
)
from eval_pipeline.tables.stage_files import StageFile, StageWriter
from eval_pipeline.viewer.export import export_report
from eval_pipeline_tests.lane_requests import lane_request

from .conftest import StoredRun, record_run, run_keys

runner = CliRunner()
LANE, SPLIT = "conversational_thread_coherence", "public"
METRIC, PREDICATE = "length_adequate_rate", "length_adequate"  # >= 0.95 over turns: not pinned
BEFORE = StoredRun("run-t1", "reference", "2024-06-01", True, lane=LANE)
AFTER = StoredRun("run-t2", "reference", "2024-06-02", True, lane=LANE)
TURN_KEYS = ["case_id", "sample_index", "turn_index", "predicate"]


@pytest.fixture(scope="module")
def coherence() -> LaneRun:
    return evaluate_lane(find_lane(LANE), SPLIT, build_runtime("reference"))


@pytest.fixture(scope="module")
def coherence_three_samples() -> LaneRun:
    return evaluate_lane(find_lane(LANE), SPLIT, build_runtime("reference"), repeat=3)


def first_turns(run: LaneRun, per_case: int, samples: Iterable[int] = (0,)) -> np.ndarray:
    """The rows of ``PREDICATE`` on each case's first ``per_case`` judged turns, in ``samples``."""
    rows = run.turn_predicates
    judged = rows[
        rows["predicate"].eq(PREDICATE) & rows["passed"].notna() & rows["sample_index"].isin(list(samples))
    ]
    rank = judged.groupby(["case_id", "sample_index"])["turn_index"].rank(method="first")
    return rows.index.isin(judged.index[rank <= per_case])


def worsened(run: LaneRun, chosen: np.ndarray) -> LaneRun:
    """``run`` with the chosen turn predicate rows failed, and its metric counted again."""
    turns = run.turn_predicates.copy()
    turns.loc[chosen, ["passed", "code"]] = [False, "too_short"]
    return with_rate(LaneRun(**{**vars(run), "turn_predicates": turns}), METRIC, turns, PREDICATE)


def faulted(run: LaneRun, cases: dict[str, list[int]]) -> LaneRun:
    """``run`` with the given (case → turn indexes) faulted, and its error_rate counted again."""
    transcripts = run.transcripts.copy()
    for case_id, turns in cases.items():
        hit = transcripts["case_id"].eq(case_id) & transcripts["turn_index"].isin(turns)
        transcripts.loc[hit, "error"] = "timeout: no reply in 30 s"
    changed = LaneRun(**{**vars(run), "transcripts": transcripts})
    value = error_rate(transcripts)
    return with_metric(changed, "error_rate", value.value, value.numerator, value.denominator)


def with_rate(run: LaneRun, metric: str, turns: pd.DataFrame, predicate: str) -> LaneRun:
    judged = turns[turns["predicate"].eq(predicate) & turns["passed"].notna()]
    held = float(judged["passed"].astype(bool).sum())
    return with_metric(run, metric, held / len(judged), held, float(len(judged)))


def with_metric(
    run: LaneRun, metric: str, value: float | None, numerator: float | None, denominator: float | None
) -> LaneRun:
    metrics = run.metrics.copy()
    row = metrics["metric"].eq(metric)
    metrics.loc[row, ["value", "numerator", "denominator"]] = [value, numerator, denominator]
    threshold = float(metrics.loc[row, "threshold"].iloc[0])
    op = str(metrics.loc[row, "threshold_op"].iloc[0])
    passed = value is not None and (value >= threshold if op == ">=" else abs(value - threshold) < 1e-9)
    metrics.loc[row, "passed"] = passed
    return LaneRun(**{**vars(run), "metrics": metrics})


def regressions(
    root: str, run: LaneRun, run_id: str | None = None, **current: object
) -> dict[str, MetricFinding]:
    """``no_regression``'s findings for ``run`` (not yet in history) against the series' last run;
    ``current`` replaces its tables (``case_predicates``, ``turn_verdicts``, ``transcripts``)."""
    tables = {
        "case_predicates": run.case_predicates,
        "turn_verdicts": run.turn_predicates,
        "transcripts": run.transcripts,
        **current,
    }
    found = find_regressions(
        root,
        series=Series(LANE, SPLIT, "reference", SPLIT),
        metrics=run.metrics if run_id is None else run.metrics.assign(run_id=run_id),
        metric_rows=lane_kind(find_lane(LANE)).metric_rows,
        alpha=find_lane(LANE).regression_alpha,
        **tables,  # type: ignore[arg-type]
    )
    return {f.metric: f for f in found}


def compare_document(a: str, b: str) -> dict[str, dict[str, object]]:
    result = runner.invoke(app, ["compare", "--run", a, "--run", b, "--json"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    return {m["metric"]: m for m in json.loads(result.output)["metrics"]}


def test_a_turn_rate_regression_is_flagged(history_root: Path, coherence: LaneRun) -> None:
    """Two of each thread's turns got too short: 12 of 58 turns, in every one of the 6 threads.
    Before, a rate over turns that is not pinned was "not tested: a rate over turns"."""
    root = str(history_root)
    record_run(root, coherence, BEFORE)
    worse = worsened(coherence, first_turns(coherence, 2))
    findings = regressions(root, worse)
    finding = findings[METRIC]
    # What the check's description (and the CLI, under the lane's metrics) says.
    assert regression_sentence(list(findings.values())) == (
        "1 metric(s) regressed vs run-t1: length_adequate_rate "
        f"(12 turns worse, 0 better of 58 turns in 6 cases, p = {1 / 10_001:.4g})"
    )
    assert (finding.cases, finding.turns, finding.worse, finding.better) == (6, 58, 12, 0)
    assert finding.regressed and "significantly worse vs run-t1" in finding.note
    assert "clustered: bootstrap over cases" in finding.note
    assert finding.p_value is not None and finding.p_value < 0.05
    assert finding.flipped_case_ids == tuple(sorted(set(coherence.transcripts["case_id"])))
    # Nothing moved on the other turn rates: tested, not regressed.
    grounded = regressions(root, worse)["per_turn_grounded_rate"]
    assert (grounded.worse, grounded.better, grounded.regressed) == (0, 0, False)
    assert grounded.p_value == 1.0


def test_one_shorter_turn_is_not_a_regression_of_a_floor(history_root: Path, coherence: LaneRun) -> None:
    root = str(history_root)
    record_run(root, coherence, BEFORE)
    chosen = first_turns(coherence, 1) & coherence.turn_predicates["case_id"].eq(
        sorted(set(coherence.transcripts["case_id"]))[0]
    )
    finding = regressions(root, worsened(coherence, chosen))[METRIC]
    assert (finding.worse, finding.better, finding.regressed) == (1, 0, False)
    assert finding.note.startswith("not significantly worse")


def test_error_rate_is_paired_on_turns(history_root: Path, coherence: LaneRun) -> None:
    """error_rate (== 0, pinned) was 1 faulted turn last night: it no longer held its pin, so
    "held it last time, not now" saw nothing. Two turns that answered last night now fault."""
    root = str(history_root)
    threads = sorted(set(coherence.transcripts["case_id"]))
    record_run(root, faulted(coherence, {threads[0]: [0]}), BEFORE)
    tonight = faulted(coherence, {threads[0]: [0, 1], threads[1]: [3]})
    finding = regressions(root, tonight)["error_rate"]
    assert (finding.cases, finding.turns, finding.worse, finding.better) == (6, 58, 2, 0)
    assert finding.regressed and "pinned at 0 and 2 turn(s) went the bad way" in finding.note
    assert finding.flipped_case_ids == (threads[0], threads[1])
    record_run(root, tonight, AFTER)
    error = compare_document(BEFORE.run_id, AFTER.run_id)["error_rate"]
    assert error["method"] == "clustered: bootstrap over cases" and error["over"] == "turns"
    assert (error["rate_a"], error["rate_b"]) == (pytest.approx(1 / 58), pytest.approx(3 / 58))
    assert (error["verdicts_a"], error["verdicts_b"], error["cases"]) == (58, 58, 6)
    assert error["higher_is_better"] is False and error["ci_low"] <= error["paired_delta"] <= error["ci_high"]


def test_history_without_turn_verdicts_still_reads(history_root: Path, coherence: LaneRun) -> None:
    """Runs stored before history kept turn verdicts (and one without transcripts)."""
    root = str(history_root)
    record_run(root, coherence, BEFORE, turn_verdicts=False, keep_transcripts=False)
    findings = regressions(root, worsened(coherence, first_turns(coherence, 2)))
    assert findings[METRIC].note == "not tested: no turn verdicts in history for run run-t1"
    assert findings[METRIC].cases is None and not findings[METRIC].regressed
    assert findings["error_rate"].note.startswith("not tested: no transcripts in history for run run-t1")
    assert findings["case_no_drift_rate"].cases == 6  # the rates over cases are tested as before
    record_run(root, coherence, AFTER)
    metrics = compare_document(BEFORE.run_id, AFTER.run_id)
    assert metrics[METRIC]["verdict"] == "not tested: no turn verdicts in history for run run-t1"
    assert metrics[METRIC]["p_value"] is None and metrics[METRIC]["value_a"] == 1.0
    assert metrics["error_rate"]["verdict"] == "not tested: no transcripts in history for run run-t1"
    assert metrics["case_no_drift_rate"]["method"] == "exact McNemar"
    result = runner.invoke(
        app, ["compare", "--run", BEFORE.run_id, "--run", AFTER.run_id], env={"COLUMNS": "250"}
    )
    assert result.exit_code == 0 and "no turn verdicts in history for run run-t1" in result.output
    # A run whose own turn verdicts are not at hand (the report reads them from history) says so.
    unknown = regressions(root, coherence, run_id="run-t3", turn_verdicts=coherence.turn_predicates.iloc[:0])
    assert unknown[METRIC].previous_run_id == AFTER.run_id
    assert unknown[METRIC].note == "not tested: no turn verdicts in history for run run-t3"


def direct_turn_counts(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Per case, straight from the runs' turn predicate tables: paired turns and passes a side."""
    keys = TURN_KEYS
    judged = [t[t["predicate"].eq(PREDICATE) & t["passed"].notna()][[*keys, "passed"]] for t in (a, b)]
    both = judged[0].merge(judged[1], on=keys, suffixes=("_a", "_b"))
    both = both.assign(pass_a=both["passed_a"].astype(int), pass_b=both["passed_b"].astype(int))
    return both.groupby("case_id").agg(turns=("pass_a", "size"), a=("pass_a", "sum"), b=("pass_b", "sum"))


def test_compare_json_figures_of_a_turn_metric(history_root: Path, coherence: LaneRun) -> None:
    root = str(history_root)
    record_run(root, coherence, BEFORE)
    later = worsened(coherence, first_turns(coherence, 1))
    record_run(root, later, AFTER)
    figures = compare_document(BEFORE.run_id, AFTER.run_id)[METRIC]
    direct = direct_turn_counts(coherence.turn_predicates, later.turn_predicates)
    turns = int(direct["turns"].sum())
    assert (figures["cases"], figures["verdicts_a"], figures["verdicts_b"]) == (len(direct), turns, turns)
    assert figures["rate_a"] == pytest.approx(direct["a"].sum() / turns)
    assert figures["rate_b"] == pytest.approx(direct["b"].sum() / turns)
    assert figures["paired_delta"] == pytest.approx((direct["b"].sum() - direct["a"].sum()) / turns)
    oracle = paired_figures(direct["a"], direct["turns"], direct["b"], direct["turns"])
    assert oracle is not None
    assert (figures["ci_low"], figures["ci_high"], figures["p_value"]) == (
        oracle.ci_low,
        oracle.ci_high,
        oracle.p_value,
    )
    assert figures["method"] == "clustered: bootstrap over cases" and figures["only_a"] is None
    assert figures["verdict"] == "B worse" and figures["p_holm"] >= figures["p_value"]
    result = runner.invoke(
        app, ["compare", "--run", BEFORE.run_id, "--run", AFTER.run_id], env={"COLUMNS": "250"}
    )
    row = next(line for line in result.output.splitlines() if line.strip().startswith(METRIC) and "[" in line)
    assert f"{oracle.p_value:.4g} clustered" in row
    sql = runner.invoke(
        app, ["history", "--sql", "select count(*) as n from turn_verdicts", "--format", "csv"]
    )
    assert sql.exit_code == 0 and sql.output.split() == ["n", str(2 * len(coherence.turn_predicates))]


def test_three_samples_are_clustered_by_case(history_root: Path, coherence_three_samples: LaneRun) -> None:
    """Pairs are (case, sample, turn): only sample 2 got worse; the bootstrap resamples the 6
    cases whole, never the 18 sessions or the 174 turns as if they were independent."""
    root = str(history_root)
    run = coherence_three_samples
    record_run(root, run, BEFORE)
    later = worsened(run, first_turns(run, 2, samples=[2]))
    finding = regressions(root, later)[METRIC]
    assert (finding.cases, finding.turns, finding.worse, finding.better) == (6, 3 * 58, 12, 0)
    record_run(root, later, AFTER)
    figures = compare_document(BEFORE.run_id, AFTER.run_id)[METRIC]
    direct = direct_turn_counts(run.turn_predicates, later.turn_predicates)
    assert len(direct) == figures["cases"] == 6 and figures["verdicts_a"] == 3 * 58
    oracle = paired_figures(direct["a"], direct["turns"], direct["b"], direct["turns"])
    assert oracle is not None and (figures["ci_low"], figures["ci_high"]) == (oracle.ci_low, oracle.ci_high)
    by_session = direct_turn_counts(  # resampling sessions as cases would give another interval
        run.turn_predicates.assign(
            case_id=run.turn_predicates["case_id"] + run.turn_predicates["sample_index"].astype(str)
        ),
        later.turn_predicates.assign(
            case_id=later.turn_predicates["case_id"] + later.turn_predicates["sample_index"].astype(str)
        ),
    )
    unclustered = paired_figures(by_session["a"], by_session["turns"], by_session["b"], by_session["turns"])
    assert unclustered is not None and len(by_session) == 18
    assert (unclustered.ci_low, unclustered.ci_high) != (oracle.ci_low, oracle.ci_high)


def stage_file(folder: Path, schema: object, rows: pd.DataFrame, batches: int = 2) -> StageFile:
    """``rows`` as a stage file of ``schema`` in ``batches`` row groups (whole cases each)."""
    cases = sorted(set(rows["case_id"]))
    with StageWriter(schema, folder) as writer:  # type: ignore[arg-type]
        for part in np.array_split(np.array(cases, dtype=object), batches):
            writer.write(rows[rows["case_id"].isin(list(part))])
        return writer.finish()


def test_the_history_asset_path_stores_and_reads_stage_files(
    history_root: Path, tmp_path: Path, coherence: LaneRun
) -> None:
    """What the Dagster history asset does with a run's stage files: turn_verdicts is the turn
    predicates' stage file without code and evidence, and no_regression reads the current run's
    stage files where they lie, with the same findings as from frames."""
    root = str(history_root)
    record_run(root, coherence, BEFORE)
    later = worsened(coherence, first_turns(coherence, 2))
    keys = run_keys(AFTER)
    turns = stage_file(tmp_path, TURN_PREDICATES, later.turn_predicates.assign(**keys))
    transcripts = stage_file(tmp_path, TRANSCRIPTS, later.transcripts.assign(**keys))
    from_files = regressions(root, later, turn_verdicts=turns, transcripts=transcripts)
    from_frames = regressions(root, later)
    assert from_files[METRIC].regressed and from_files[METRIC].turns == 58
    assert [(f.metric, f.worse, f.better, f.p_value, f.regressed) for f in from_files.values()] == [
        (f.metric, f.worse, f.better, f.p_value, f.regressed) for f in from_frames.values()
    ]
    path = append_run(root, "turn_verdicts", turns, lane=LANE, date=AFTER.date, run_id=AFTER.run_id)
    assert path == run_file(root, "turn_verdicts", LANE, AFTER.date, AFTER.run_id)
    stored = pq.ParquetFile(path)
    assert stored.schema_arrow.names == TURN_VERDICTS.names and stored.metadata.num_row_groups == 2
    expected = to_arrow(TURN_VERDICTS, later.turn_predicates, **keys).to_pandas(types_mapper=nullable_types)
    pd.testing.assert_frame_equal(
        stored.read().to_pandas(types_mapper=nullable_types),
        expected.sort_values("case_id", kind="stable").reset_index(drop=True),
    )
    assert append_run(root, "turn_verdicts", turns, lane=LANE, date=AFTER.date, run_id=AFTER.run_id) is None
    with pytest.raises(ValueError, match="not those of turn_verdicts"):
        append_run(root, "turn_verdicts", transcripts, lane=LANE, date="2024-06-03", run_id="run-t3")


def test_case_predicates_are_read_from_their_stage_file_where_it_lies(
    history_root: Path, tmp_path: Path, coherence: LaneRun
) -> None:
    """The history asset hands no_regression the run's case predicates as its stage file: the
    findings are those from the frame, and a series' first run does not read the file at all."""
    root = str(history_root)
    keys = run_keys(AFTER)
    missing = stage_file(tmp_path, CASE_PREDICATES, coherence.case_predicates.assign(**keys))
    missing.path.unlink()
    first = regressions(root, coherence, case_predicates=missing)
    assert {f.note for f in first.values()} == {"no previous run of this series"}

    record_run(root, coherence, BEFORE)
    cases = coherence.case_predicates.copy()
    held = cases.index[cases["passed"].eq(True)][:3]
    cases.loc[held, "passed"] = False  # three verdicts went the bad way
    later = LaneRun(**{**vars(coherence), "case_predicates": cases})
    from_file = regressions(
        root, later, case_predicates=stage_file(tmp_path, CASE_PREDICATES, cases.assign(**keys))
    )
    from_frame = regressions(root, later)
    figures = [
        (f.metric, f.cases, f.worse, f.better, f.p_value, f.regressed, f.flipped_case_ids)
        for f in from_file.values()
    ]
    assert figures == [
        (f.metric, f.cases, f.worse, f.better, f.p_value, f.regressed, f.flipped_case_ids)
        for f in from_frame.values()
    ]
    threads = cases["case_id"].nunique()
    assert any(f.worse and f.cases == threads for f in from_file.values())


def test_the_report_shows_a_turn_rate_regression(
    history_root: Path, tmp_path: Path, coherence: LaneRun
) -> None:
    """The HTML report decides no_regression as the check does, the current run's turn verdicts
    read back from history."""
    root = str(history_root)
    record_run(root, coherence, BEFORE)
    record_run(root, worsened(coherence, first_turns(coherence, 2)), AFTER)
    html = export_report(root, tmp_path / "report").read_text(encoding="utf-8")
    regression = html[html.index("<h4>no_regression against run-t1") :]
    regression = regression[: regression.index("</table>")]
    assert '<span class="warn">warn</span>' in regression
    assert re.search(
        r"length_adequate_rate</td><td>1</td><td>0.7931</td><td class=\"num\">12 turns</td>"
        r"<td class=\"num\">0 turns</td><td class=\"num\">9.999e-05</td><td class=\"warn\">regressed<",
        regression,
    ), regression
    assert "of 58 turns in 6 cases" in regression


@pytest.mark.slow
def test_the_no_regression_check_tests_a_rate_over_turns_in_a_dagster_run(tmp_path: Path) -> None:
    """Two nights of one runtime (the same replay path) through Dagster: the thread answers as
    recorded, then with the first two turns of every thread cut short. The history asset pairs
    the turns from the run's stage files and the check's metadata carries the turn counts."""
    columns = ["case_id", "turn_index", "prompt", "surface", "grounding_source", "surface_tag"]
    live = evaluate_lane(find_lane(LANE), SPLIT, build_runtime("reference")).transcripts[columns]
    recorded = tmp_path / "night.jsonl"
    nights = []
    for cut in (False, True):
        replies = live.copy()
        if cut:
            replies.loc[replies["turn_index"] < 2, "surface"] = "It is so."
        recorded.write_text(
            "\n".join(json.dumps(r) for r in replies.to_dict("records")) + "\n", encoding="utf-8"
        )
        nights.append(
            materialize_lane(
                find_lane(LANE),
                find_target(f"replay:{recorded}"),
                lane_request(SPLIT, "2026-11-30"),
                instance=ensure_instance(),
            )
        )
    first, second = ({c.name: c for c in night.checks} for night in nights)
    assert first["no_regression"].passed and not second["no_regression"].passed
    metadata = second["no_regression"].metadata
    assert METRIC in metadata["regressed_metrics"]
    paired = {row["metric"]: row for row in metadata["paired_counts"]}
    assert {k: paired[METRIC][k] for k in ("cases", "turns", "worse", "better", "regressed")} == {
        "cases": 6,
        "turns": 58,
        "worse": 12,
        "better": 0,
        "regressed": True,
    }
    assert paired["error_rate"]["turns"] == 58 and paired["error_rate"]["regressed"] is False
