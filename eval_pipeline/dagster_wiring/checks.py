"""Asset checks from a lane's thresholds: the specs, and their results for one run.

Every check is partitioned like its asset (case set × runtime target: one partition per
series), so a check's status and history are read per series: a failing run of one target
never turns another target's check red. No check blocks: a run that measured its runtime and
found it failing a threshold *succeeded* (its checks failed, its ``eval_pipeline/verdict`` tag
says ``fail``); only a run that broke fails."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import dagster as dg
import pandas as pd

from eval_pipeline.dagster_wiring.markdown import markdown_table
from eval_pipeline.failures import failing_rows_for_metric, fault_counts
from eval_pipeline.history.regression import MetricFinding, findings_frame, regression_sentence
from eval_pipeline.lanes.metric_rows import MetricRows
from eval_pipeline.lanes.spec import LaneSpec
from eval_pipeline.scoring import Measurement, ThresholdVerdict, number_text

MAX_CASES_SHOWN = 25
METRIC_DIGITS = 4  # metadata values are rounded: 0.9333, not 0.9333333333333333
MEASUREMENT_CHECK = "measurement"

_SEVERITY = {"ERROR": dg.AssetCheckSeverity.ERROR, "WARN": dg.AssetCheckSeverity.WARN}


REGRESSION_CHECK = "no_regression"
GATE_CHECK = "error_thresholds_hold"


def check_spec(
    name: str, asset: dg.AssetKey, partitions: dg.PartitionsDefinition, description: str
) -> dg.AssetCheckSpec:
    """A check of one lane asset, partitioned like it (one status and history per series)."""
    with preview_apis():
        return dg.AssetCheckSpec(name=name, asset=asset, description=description, partitions_def=partitions)


def regression_check_spec(history_key: dg.AssetKey, partitions: dg.PartitionsDefinition) -> dg.AssetCheckSpec:
    """The lane's regression check, on its history asset: against the previous run of the series."""
    return check_spec(
        REGRESSION_CHECK,
        history_key,
        partitions,
        "No rate is significantly worse than in the previous run of this series (lane, split, "
        "runtime, case set), paired on the common cases (one-sided exact McNemar at the lane's "
        "regression_alpha), and no case went the bad way on a rate pinned at == 1 or == 0.",
    )


def series_label(name: str, series: str) -> str:
    """A plotted number's label within one series: ``no_dotted_inventory_rate · public|reference``.
    Dagster draws every event's value of one label as one line, so a label names its series."""
    return f"{name} · {series}"


def count_text(value: float) -> dg.TextMetadataValue:
    """A count shown as text: read in the metadata table, not plotted."""
    return dg.MetadataValue.text(number_text(value))


def rounded(value: float) -> float:
    return round(float(value), METRIC_DIGITS)


def measurement_check_spec(
    spec: LaneSpec, metrics_key: dg.AssetKey, partitions: dg.PartitionsDefinition
) -> dg.AssetCheckSpec:
    """The run measured its runtime: error_rate at most the lane's (or the target's) max_error_rate."""
    return check_spec(
        MEASUREMENT_CHECK,
        metrics_key,
        partitions,
        f"error_rate <= max_error_rate ({spec.max_error_rate:g} unless the runtime target "
        "sets its own): above it the run is void, the runtime was not measured and no check counts as "
        "passed. A void run still goes to history, marked void.",
    )


def measurement_check_result(
    measured: Measurement, transcripts: pd.DataFrame, *, series: str
) -> dg.AssetCheckResult:
    faults = fault_counts(transcripts)
    return dg.AssetCheckResult(
        check_name=MEASUREMENT_CHECK,
        passed=not measured.void,
        severity=dg.AssetCheckSeverity.ERROR,
        description=measured.explain(),
        metadata={
            "verdict": dg.MetadataValue.text("void" if measured.void else "pass"),
            series_label("error_rate", series): dg.MetadataValue.float(rounded(measured.error_rate or 0.0)),
            "max_error_rate": count_text(measured.max_error_rate),
            "faulted_turns": count_text(measured.faulted_turns),
            "faults": dg.MetadataValue.md(
                markdown_table(faults, ("turns", "fault"), limit=MAX_CASES_SHOWN, more="distinct faults")
                if faults
                else "No turn faulted."
            ),
        },
    )


def failing_sentence(case_ids: Sequence[str], *, shown: int = 5) -> str:
    """``3 failing case(s): a, b, c.`` (the first few; the metadata table has the rest)."""
    listed = ", ".join(case_ids[:shown]) + (
        f" and {len(case_ids) - shown} more" if len(case_ids) > shown else ""
    )
    return f"{len(case_ids)} failing case(s): {listed}."


def failed_sentence(verdict: ThresholdVerdict) -> str:
    """``no_dotted_inventory_rate = 0.3333, needs >= 0.9 (ERROR).``: what failed, in one line."""
    value = "missing" if verdict.metric.value is None else f"{rounded(verdict.metric.value):g}"
    gated = (
        f" ({verdict.statistic} {rounded(verdict.gated_value):g})"
        if verdict.gated_value is not None and verdict.statistic != "mean"
        else ""
    )
    return f"{verdict.metric.metric} = {value}{gated}, needs {verdict.bound} ({verdict.threshold.severity})."


def threshold_check_specs(
    spec: LaneSpec, metrics_key: dg.AssetKey, partitions: dg.PartitionsDefinition
) -> list[dg.AssetCheckSpec]:
    """One check per threshold: a run that fails a floor is still a measurement and goes to history."""
    return [
        check_spec(t.check_name, metrics_key, partitions, f"{t.describe()}: {t.reason}")
        for t in spec.effective_thresholds
    ]


def gate_check_spec(history_key: dg.AssetKey, partitions: dg.PartitionsDefinition) -> dg.AssetCheckSpec:
    """The run's verdict in one check, once its results are in history: failed when an ERROR
    threshold failed or the run is void (its metrics rows say ``void``)."""
    return check_spec(
        GATE_CHECK,
        history_key,
        partitions,
        "The run was measured (not void) and every ERROR threshold of the metrics asset held "
        "(checked after the run is in history, so a failing or void run is still recorded).",
    )


@contextmanager
def preview_apis() -> Iterator[None]:
    """Partitioned asset checks are a Dagster preview API, chosen knowingly (pinned dagster): its
    warning is not repeated on every command's stderr."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        yield


def run_is_void(metrics: pd.DataFrame) -> bool:
    """Whether the run measured nothing, from its metrics rows: every threshold's verdict is
    void (a void measurement voids them all; one metric with nothing to measure voids only its own)."""
    gated = metrics[metrics["threshold"].notna()]
    return bool(len(gated)) and bool(gated["verdict"].eq("void").all())


def gate_check_result(metrics: pd.DataFrame) -> dg.AssetCheckResult:
    """The gate's result, read from the verdicts the metrics table already holds: failed when the
    run is void, or an ERROR threshold failed (a threshold that measured nothing is not a failure)."""
    void = run_is_void(metrics)
    failed = metrics[
        metrics["severity"].eq("ERROR").fillna(False)
        & metrics["passed"].eq(False).fillna(False)
        & metrics["verdict"].ne("void").fillna(True)
    ]
    failed_names = [str(m) for m in failed["metric"]]
    if void:
        description = "void: the run measured nothing (see the measurement check and each threshold's reason)"
    elif failed_names:
        description = f"{len(failed_names)} ERROR threshold(s) failed: {', '.join(failed_names)}"
    else:
        description = "every ERROR threshold held"
    return dg.AssetCheckResult(
        check_name=GATE_CHECK,
        passed=not void and not failed_names,
        severity=dg.AssetCheckSeverity.ERROR,
        description=description,
        metadata={
            "verdict": dg.MetadataValue.text("void" if void else "fail" if failed_names else "pass"),
            "failed_thresholds": dg.MetadataValue.json([] if void else failed_names),
        },
    )


def threshold_check_results(
    verdicts: Sequence[ThresholdVerdict],
    failing: pd.DataFrame,
    faults: pd.DataFrame,
    measured: Measurement,
    *,
    samples: int,
    flaky: pd.DataFrame,
    series: str,
    links: Mapping[str, dg.MetadataValue] | None = None,
    metric_rows: Mapping[str, MetricRows],
) -> list[dg.AssetCheckResult]:
    """The asset check results of one run, rendered from its threshold verdicts: the verdict
    word, rounded values and, for a check with failing cases, a markdown table of them (case,
    predicate, code, reason). ``failing`` holds the run's failing case predicate rows (at
    least), ``faults`` its faulted transcript rows, ``flaky`` its case predicates whose
    ``samples`` disagree (:func:`eval_pipeline.samples.flaky_within_run`), ``metric_rows`` the
    lane's rates' predicate rows (what a failing-case table lists). ``series`` is the
    partition key: the one number a check plots (its observed value) is labelled with it, so a
    check's plot of one series never zigzags through another's values; counts are text.
    ``links`` (the run's page in the viewer) go on every check that did not pass."""
    results: list[dg.AssetCheckResult] = []
    for verdict in verdicts:
        m, t = verdict.metric, verdict.threshold
        metadata: dict[str, dg.MetadataValue] = {
            "verdict": dg.MetadataValue.text(verdict.word),
            "threshold": dg.MetadataValue.text(verdict.bound),
            series_label("observed", series): dg.MetadataValue.float(rounded(m.value))
            if m.value is not None
            else dg.MetadataValue.text("missing (no applicable cases)"),
            "failing_cases": count_text(len(m.failing_case_ids)),
        }
        if m.denominator is not None:
            metadata["denominator"] = count_text(m.denominator)
        if verdict.void:
            metadata["void_reason"] = dg.MetadataValue.text(verdict.void_reason)
        if m.failing_case_ids:
            shown = m.failing_case_ids[:MAX_CASES_SHOWN]
            rows = failing_rows_for_metric(metric_rows.get(m.metric), shown, failing, faults, samples=samples)
            metadata["failing_case_table"] = dg.MetadataValue.md(
                markdown_table(
                    rows.to_dict("records"),
                    ("case_id", "predicate", "code", "reason"),
                    limit=MAX_CASES_SHOWN,
                    more="failing rows (eval-pipeline show RUN lists them all)",
                )
            )
            metadata["failing_case_ids"] = dg.MetadataValue.json(list(m.failing_case_ids[:MAX_CASES_SHOWN]))
        if not flaky.empty:  # samples of a case that disagree: the interval is wide for a reason
            metadata["flaky_cases"] = dg.MetadataValue.md(
                markdown_table(
                    flaky.to_dict("records"),
                    ("case_id", "predicate", "passes", "samples", "flips"),
                    limit=MAX_CASES_SHOWN,
                    more="flaky case predicates",
                )
            )
        if m.samples > 1:
            metadata["samples"] = count_text(m.samples)
            metadata["statistic"] = dg.MetadataValue.text(verdict.statistic)
            if verdict.gated_value is not None:
                metadata[series_label("gated_value", series)] = dg.MetadataValue.float(
                    rounded(verdict.gated_value)
                )
        # A failed check says what failed first (metric, value, threshold, severity), then
        # which cases, then why the threshold exists.
        sentences = [f"void: {verdict.void_reason}" if verdict.void else t.reason]
        if m.failing_case_ids and not verdict.passed:
            sentences.insert(0, failing_sentence(m.failing_case_ids))
        if not verdict.passed and not verdict.void:
            sentences.insert(0, failed_sentence(verdict))
        description = " ".join(sentences)
        if not verdict.passed:
            metadata.update(links or {})
        results.append(
            dg.AssetCheckResult(
                check_name=t.metric,
                passed=verdict.passed,
                severity=_SEVERITY[t.severity],
                metadata=metadata,
                description=description,
            )
        )
    return results


def regression_check_result(findings: Sequence[MetricFinding]) -> dg.AssetCheckResult:
    regressed = [f for f in findings if f.regressed]
    shown = findings_frame(list(regressed or findings)).to_dict("records")
    columns = ("metric", "value", "previous_value", "turns", "worse", "better", "p_value", "note")
    flipped = sorted({case for f in regressed for case in f.flipped_case_ids})
    compared = next((f.previous_run_id for f in findings if f.previous_run_id), None)
    return dg.AssetCheckResult(
        check_name=REGRESSION_CHECK,
        passed=not regressed,
        severity=dg.AssetCheckSeverity.WARN,
        description=regression_sentence(findings),
        metadata={
            "previous_run_id": dg.MetadataValue.text(compared or "none: first run of this series"),
            "regressed_metrics": dg.MetadataValue.json([f.metric for f in regressed]),
            "flipped_case_ids": dg.MetadataValue.json(flipped[:MAX_CASES_SHOWN]),
            # Per tested rate: the common cases (and, over turns, the paired turns), how many went
            # the bad way and the good way (turns, for a rate over turns), the one-sided p-value.
            "paired_counts": dg.MetadataValue.json(
                [
                    {
                        "metric": f.metric,
                        "cases": f.cases,
                        "turns": f.turns,
                        "worse": f.worse,
                        "better": f.better,
                        "p_value": f.p_value,
                        "regressed": f.regressed,
                    }
                    for f in findings
                    if f.cases is not None
                ]
            ),
            "findings": dg.MetadataValue.md(markdown_table(shown, columns, limit=50, more="metrics")),
        },
    )
