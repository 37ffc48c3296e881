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

from eval_pipeline.history.regression import MetricFinding, findings_frame, regression_sentence
from eval_pipeline.lanes import LaneSpec
from eval_pipeline.lanes.metric_rows import MetricRows
from eval_pipeline.metrics import number_text
from eval_pipeline.outcome import (
    GATE_CHECK,
    MEASUREMENT_CHECK,
    REGRESSION_CHECK,
    CheckOutcome,
    FailingItem,
    RunOutcome,
    regression_check,
    rounded,
)
from eval_pipeline.report import markdown_table

MAX_CASES_SHOWN = 25

_SEVERITY = {"ERROR": dg.AssetCheckSeverity.ERROR, "WARN": dg.AssetCheckSeverity.WARN}


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


def measurement_check_result(outcome: RunOutcome, *, series: str) -> dg.AssetCheckResult:
    """The measurement check, rendered from the run's outcome."""
    check = outcome.check(MEASUREMENT_CHECK)
    assert check is not None, "a judged outcome always holds its measurement check"
    faults = [dict(f) for f in outcome.faults]
    return dg.AssetCheckResult(
        check_name=MEASUREMENT_CHECK,
        passed=check.passed,
        severity=dg.AssetCheckSeverity.ERROR,
        description=check.description,
        metadata={
            "verdict": dg.MetadataValue.text(check.verdict),
            series_label("error_rate", series): dg.MetadataValue.float(rounded(check.value or 0.0)),
            "max_error_rate": dg.MetadataValue.text(str(check.threshold).removeprefix("<= ")),
            "faulted_turns": count_text(sum(int(f["turns"]) for f in faults)),
            "faults": dg.MetadataValue.md(
                markdown_table(faults, ("turns", "fault"), limit=MAX_CASES_SHOWN, more="distinct faults")
                if faults
                else "No turn faulted."
            ),
        },
    )


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


def gate_check_result(outcome: RunOutcome) -> dg.AssetCheckResult:
    """The gate: the run's verdict in one check, rendered from its outcome; failed when the run
    is void or a blocking (ERROR) check failed."""
    failed_names = [c.name for c in outcome.blocking_failures]
    if outcome.void:
        description = "void: the run measured nothing (see the measurement check and each threshold's reason)"
    elif failed_names:
        description = f"{len(failed_names)} ERROR threshold(s) failed: {', '.join(failed_names)}"
    else:
        description = "every ERROR threshold held"
    return dg.AssetCheckResult(
        check_name=GATE_CHECK,
        passed=not outcome.void and not failed_names,
        severity=dg.AssetCheckSeverity.ERROR,
        description=description,
        metadata={
            "verdict": dg.MetadataValue.text(outcome.verdict),
            "failed_thresholds": dg.MetadataValue.json([] if outcome.void else failed_names),
        },
    )


def failing_items_markdown(items: Sequence[FailingItem], total: int | None = None) -> str:
    """A markdown table of failing items (case, turn, predicate, code, reason), for the UI."""
    return markdown_table(
        [{**vars(item), "turn": item.where} for item in items],
        ("case_id", "turn", "predicate", "code", "reason"),
        limit=MAX_CASES_SHOWN,
        more="failing rows (eval-pipeline show RUN lists them all)",
        total=total,
    )


def threshold_check_results(
    outcome: RunOutcome,
    *,
    flaky: pd.DataFrame,
    series: str,
    links: Mapping[str, dg.MetadataValue] | None = None,
    metric_rows: Mapping[str, MetricRows],
) -> list[dg.AssetCheckResult]:
    """The threshold checks' results, rendered from the run's outcome: the verdict word, rounded
    values and, for a check with failing cases, a markdown table of their failing items (case,
    turn, predicate, code, reason: the rows its rate counts). ``flaky`` holds the run's case
    predicates whose samples disagree (:func:`eval_pipeline.metrics.samples.flaky_within_run`),
    ``metric_rows`` the lane's rates' predicate rows. ``series`` is the partition key: the one
    number a check plots (its observed value) is labelled with it, so a check's plot of one
    series never zigzags through another's values; counts are text. ``links`` (the run's page in
    the viewer) go on every check that did not pass."""
    results: list[dg.AssetCheckResult] = []
    for check in outcome.checks:
        if check.threshold is None or check.name == MEASUREMENT_CHECK:
            continue
        results.append(_threshold_result(outcome, check, flaky, series, links, metric_rows.get(check.name)))
    return results


def _threshold_result(
    outcome: RunOutcome,
    check: CheckOutcome,
    flaky: pd.DataFrame,
    series: str,
    links: Mapping[str, dg.MetadataValue] | None,
    rows: MetricRows | None,
) -> dg.AssetCheckResult:
    metadata: dict[str, dg.MetadataValue] = {
        "verdict": dg.MetadataValue.text(check.verdict),
        "threshold": dg.MetadataValue.text(str(check.threshold)),
        series_label("observed", series): dg.MetadataValue.float(rounded(check.value))
        if check.value is not None
        else dg.MetadataValue.text("missing (no applicable cases)"),
        "failing_cases": count_text(len(check.failing_case_ids)),
    }
    if check.n is not None:
        metadata["denominator"] = count_text(check.n)
    if check.verdict == "void":
        metadata["void_reason"] = dg.MetadataValue.text(check.reason)
    if check.failing_case_ids:
        shown = check.failing_case_ids[:MAX_CASES_SHOWN]
        items = outcome.items_of(shown, None if rows is None else rows.predicates) or outcome.items_of(shown)
        metadata["failing_case_table"] = dg.MetadataValue.md(failing_items_markdown(items))
        metadata["failing_case_ids"] = dg.MetadataValue.json(list(shown))
    if not flaky.empty:  # samples of a case that disagree: the interval is wide for a reason
        metadata["flaky_cases"] = dg.MetadataValue.md(
            markdown_table(
                flaky.to_dict("records"),
                ("case_id", "predicate", "passes", "samples", "flips"),
                limit=MAX_CASES_SHOWN,
                more="flaky case predicates",
            )
        )
    for name, value in check.metadata.items():  # a sampled run's: samples, statistic, gated_value
        if name == "gated_value" and isinstance(value, float):
            metadata[series_label(name, series)] = dg.MetadataValue.float(rounded(value))
        else:
            metadata[name] = (
                count_text(value) if isinstance(value, int) else dg.MetadataValue.text(str(value))
            )
    if not check.passed:
        metadata.update(links or {})
    return dg.AssetCheckResult(
        check_name=check.name,
        passed=check.passed,
        severity=_SEVERITY[check.severity],
        metadata=metadata,
        description=check.description,
    )


def regression_outcome(findings: Sequence[MetricFinding], *, void: bool) -> CheckOutcome:
    """The ``no_regression`` check of a run from its findings (n/a when nothing was compared)."""
    regressed = [f for f in findings if f.regressed]
    flipped = sorted({case for f in regressed for case in f.flipped_case_ids})
    compared = next((f.previous_run_id for f in findings if f.previous_run_id), None)
    return regression_check(
        regressed=[f.metric for f in regressed],
        description=regression_sentence(findings),
        first_run=compared is None,
        void=void,
        metadata={
            "previous_run_id": compared or "none: first run of this series",
            "regressed_metrics": [f.metric for f in regressed],
            "flipped_case_ids": flipped[:MAX_CASES_SHOWN],
            # Per tested rate: the common cases (and, over turns, the paired turns), how many went
            # the bad way and the good way (turns, for a rate over turns), the one-sided p-value.
            "paired_counts": [
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
            ],
        },
    )


def regression_check_result(check: CheckOutcome, findings: Sequence[MetricFinding]) -> dg.AssetCheckResult:
    """The ``no_regression`` check's result: its outcome (an n/a check passes in Dagster, which
    has no n/a, and says n/a) and the findings of each tested rate."""
    regressed = [f for f in findings if f.regressed]
    shown = findings_frame(list(regressed or findings)).to_dict("records")
    columns = ("metric", "value", "previous_value", "turns", "worse", "better", "p_value", "note")
    return dg.AssetCheckResult(
        check_name=REGRESSION_CHECK,
        passed=check.passed or check.verdict == "n/a",
        severity=dg.AssetCheckSeverity.WARN,
        description=check.description,
        metadata={
            "verdict": dg.MetadataValue.text(check.verdict),
            "previous_run_id": dg.MetadataValue.text(str(check.metadata["previous_run_id"])),
            "regressed_metrics": dg.MetadataValue.json(check.metadata["regressed_metrics"]),
            "flipped_case_ids": dg.MetadataValue.json(check.metadata["flipped_case_ids"]),
            "paired_counts": dg.MetadataValue.json(check.metadata["paired_counts"]),
            "findings": dg.MetadataValue.md(markdown_table(shown, columns, limit=50, more="metrics")),
        },
    )
