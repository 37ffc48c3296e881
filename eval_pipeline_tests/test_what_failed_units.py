"""The pure parts of "what failed, and why": reasons, excerpts, the void measurement and its
budgets, the verdict vocabulary, legend geometry, terminal tables, run id prefixes, JSON evidence."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from eval_pipeline.cases.loading import CaseFileError
from eval_pipeline.cli.terminal import terminal_view
from eval_pipeline.core.series import Series
from eval_pipeline.dagster_wiring.checks import gate_check_result
from eval_pipeline.history.runs import resolve_run_id
from eval_pipeline.history.svg import legend_layout
from eval_pipeline.history.views import connect
from eval_pipeline.lanes.spec import load_lane_spec
from eval_pipeline.metrics.scoring import MetricValue, judge, measurement, verdict_word
from eval_pipeline.outcome.failures import (
    FAILING_READS,
    evidence_object,
    failing_cases,
    fault_counts,
    fault_text,
)
from eval_pipeline.outcome.run_outcome import judged_outcome
from eval_pipeline.predicates import TurnView, Verdict, get_turn_predicate
from eval_pipeline.predicates.explain import _REASONS, excerpt, reason
from eval_pipeline.runtimes.targets import load_targets, resolve_target
from eval_pipeline.tables.columns import CASE_PREDICATES
from eval_pipeline.tables.stage_files import StageWriter
from eval_pipeline_tests.paths import PROJECT_ROOT


def test_reasons_quote_what_was_found() -> None:
    surface = "Time is <pending> for now."
    verdict = get_turn_predicate("no_placeholder")(TurnView(surface=surface))
    assert reason("no_placeholder", verdict) == (
        "The answer contains the placeholder “<pending>”: “Time is <pending> for now.”; send real content instead."
    )
    inventory = get_turn_predicate("no_dotted_inventory")(TurnView(surface="See a.b; c.d; e.f now."))
    assert "“a.b; c.d; e.f”" in reason("no_dotted_inventory", inventory)
    ending = get_turn_predicate("complete_punctuation")(TurnView(surface="It is fine"))
    assert reason("complete_punctuation", ending).endswith("“It is fine”; finish the sentence.")
    fault = get_turn_predicate("no_placeholder")(TurnView(surface="", error="TurnFault: timeout after 5 s"))
    assert reason("no_placeholder", fault) == (
        "The runtime call failed, so nothing could be checked: TurnFault: timeout after 5 s"
    )
    assert reason("x", Verdict.ok()) == "x holds."
    assert reason("x", Verdict.not_applicable("no_anaphora")) == "x does not apply here (no anaphora)."
    assert reason("x", Verdict.fail("brand_new_code", found=3)) == "x fails (brand new code): found=3."


def test_the_refusal_lanes_reasons_quote_the_answer() -> None:
    surface = "Brenvaltine is a well-documented subject."
    refused = get_turn_predicate("refused")(TurnView(surface=surface))
    assert reason("refused", refused) == f"Did not refuse a term it cannot ground: “{surface}”."
    fabricated = get_turn_predicate("no_fabrication")(TurnView(surface=surface))
    assert reason("no_fabrication", fabricated).startswith(
        f"Defines (“is a”) a term it cannot ground: “{surface}”"
    )
    answered = get_turn_predicate("answered")(TurnView(surface="I do not know that one."))
    assert reason("answered", answered) == (
        "Refused (“i do not know”) a question it can ground: “I do not know that one.”."
    )


@pytest.mark.parametrize("code", sorted(_REASONS))
def test_every_reason_template_is_a_sentence_even_without_evidence(code: str) -> None:
    text = reason("p", Verdict.fail(code))
    assert (text[0].isupper() and text.rstrip("”").endswith((".", ":"))) or "failed" in text
    assert "{" not in text and "None" not in text


@given(st.text(min_size=0, max_size=300), st.integers(min_value=0, max_value=300), st.integers(1, 40))
def test_an_excerpt_is_one_short_line_holding_the_fragment(text: str, at: int, length: int) -> None:
    fragment = text[at : at + length]
    quoted = excerpt(text, fragment)
    assert "\n" not in quoted and len(quoted) <= max(72, len(" ".join(fragment.split())) + 2)
    flat = " ".join(fragment.split())
    if flat and len(flat) <= 60 and flat in " ".join(text.split()):
        assert flat in quoted


def _metrics(errors: int, turns: int) -> list[MetricValue]:
    return [
        MetricValue("error_rate", errors / turns, float(errors), float(turns)),
        MetricValue("no_placeholder_rate", 1.0, 10.0, 10.0),
    ]


class _Threshold:
    def __init__(self, metric: str, op: str, value: float, severity: str) -> None:
        self.metric, self.op, self.value, self.severity, self.reason = metric, op, value, severity, "why"
        self.statistic = None


def test_a_void_measurement_passes_nothing() -> None:
    thresholds = [
        _Threshold("no_placeholder_rate", "==", 1.0, "ERROR"),
        _Threshold("error_rate", "==", 0.0, "WARN"),
    ]
    measured = judge(thresholds, _metrics(1, 20), max_error_rate=0.05)  # type: ignore[arg-type]
    assert [(v.passed, v.word) for v in measured] == [(True, "pass"), (False, "warn")]
    void = judge(thresholds, _metrics(2, 20), max_error_rate=0.05)  # type: ignore[arg-type]
    assert [(v.passed, v.word) for v in void] == [(False, "void"), (False, "void")]
    assert measurement(_metrics(2, 20), 0.05).explain().startswith("void: 2 of 20 turns faulted")
    assert not judge(thresholds, _metrics(2, 20), max_error_rate=0.2)[1].void  # type: ignore[arg-type]


def test_a_metric_that_measured_nothing_is_void_with_its_reason_not_failed() -> None:
    thresholds = [_Threshold("telemetry_consistency_rate", "==", 1.0, "ERROR")]
    metrics = [MetricValue("telemetry_consistency_rate", None, 0.0, 0.0), *_metrics(0, 20)]
    (verdict,) = judge(thresholds, metrics)  # type: ignore[arg-type]
    assert (verdict.passed, verdict.void, verdict.word) == (False, True, "void")
    assert verdict.void_reason.startswith("no case it reads was scored (0 cases)")
    (measured,) = judge(
        thresholds, [MetricValue("telemetry_consistency_rate", 1.0, 3.0, 3.0), *_metrics(0, 20)]
    )  # type: ignore[arg-type]
    assert (measured.word, measured.void_reason) == ("pass", "")


def test_the_history_gate_fails_a_void_run_even_when_only_warn_thresholds_missed() -> None:
    warn_only = [_Threshold("error_rate", "==", 0.0, "WARN")]
    for faulted, passed in ((0, True), (1, True), (2, False)):
        values = _metrics(faulted, 20)
        verdicts = judge(warn_only, values, max_error_rate=0.05)  # type: ignore[arg-type]
        outcome = judged_outcome(
            Series("lane", "dev", "reference", "dev"),
            "run",
            verdicts,
            measurement(values, 0.05),
            ([], 0, 0),
            pd.DataFrame({"case_id": [], "error": []}),
        )
        gate = gate_check_result(outcome)
        assert gate.passed is passed, faulted
        assert (gate.description or "").startswith("void") is (not passed)
        assert outcome.verdict == ("pass" if faulted == 0 else "warn" if passed else "void")


def test_verdict_vocabulary() -> None:
    assert [verdict_word(True, "ERROR"), verdict_word(False, "ERROR"), verdict_word(False, "WARN")] == [
        "pass",
        "fail",
        "warn",
    ]
    assert verdict_word(None, "ERROR") == "n/a" and verdict_word(True, "WARN", void=True) == "void"


def test_max_error_rate_in_lane_yaml_and_per_target(tmp_path: Path) -> None:
    lane = PROJECT_ROOT / "evals" / "deterministic_fluency" / "lane.yaml"
    assert load_lane_spec(lane).max_error_rate == 0.05  # the default
    own = tmp_path / "lane.yaml"
    own.write_text(lane.read_text(encoding="utf-8") + "max_error_rate: 0.25\n", encoding="utf-8")
    assert load_lane_spec(own).max_error_rate == 0.25
    own.write_text(lane.read_text(encoding="utf-8") + "max_error_rate: 2\n", encoding="utf-8")
    with pytest.raises(CaseFileError) as bad:
        load_lane_spec(own)
    assert "max_error_rate" in str(bad.value.problems[0])
    targets = tmp_path / "runtimes.yaml"
    targets.write_text(
        "targets:\n  reference: {spec: reference}\n  flaky:\n    spec: reference:no-gloss\n    max_error_rate: 0.3\n",
        encoding="utf-8",
    )
    declared = load_targets(targets)
    assert declared["flaky"].error_budget(0.05) == 0.3 and declared["reference"].error_budget(0.05) == 0.05
    assert resolve_target("flaky", {}, declared).max_error_rate == 0.3


def test_legends_are_laid_out_without_overlap() -> None:
    labels = ["public · reference", "dev · staging-gateway-eu-west-1-gpt-4-1-mini", "x", "y" * 200, "z" * 30]
    boxes = legend_layout(labels, left=4, top=170, width=412)
    assert all(b.x >= 4 and b.x + b.w <= 416 + 1e-9 for b in boxes)
    assert not any(a.intersects(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


@given(st.lists(st.text(min_size=1, max_size=80), max_size=12), st.integers(min_value=60, max_value=900))
def test_legend_boxes_never_intersect(labels: list[str], width: int) -> None:
    boxes = legend_layout(labels, left=0, top=0, width=width)
    assert not any(a.intersects(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    assert all(b.x + b.w <= width + 1e-9 for b in boxes)


def test_terminal_view_shortens_ids_and_lifts_constant_columns() -> None:
    rows = pd.DataFrame(
        {
            "lane": ["deterministic_fluency"] * 2,
            "runtime": ["reference", "reference-no-gloss"],
            "run_id": ["1a03cf48-629d-4694-a6a0-1c59c8437ce8", "b61a46a4-54f0-46b0-a034-8855de0801fa"],
            "extra": [1, 2],
        }
    )
    view, notes = terminal_view(rows, ("lane", "runtime", "run_id"), wide=False)
    assert list(view.columns) == ["runtime", "run_id"] and notes == ["lane deterministic_fluency"]
    assert view["run_id"].tolist() == ["1a03cf48", "b61a46a4"]
    wide, none = terminal_view(rows, ("lane",), wide=True)
    assert wide.equals(rows) and none == []


def test_failing_cases_and_faults() -> None:
    rows = pd.DataFrame(
        {
            "case_id": ["b", "a", "a", "c"],
            "predicate": ["p", "q", "p", "p"],
            "passed": pd.array([False, False, True, None], dtype="boolean"),
            "severity": ["report", "hard", "hard", "hard"],
            "code": ["x", "y", "ok", "n"],
            "message": ["mb", "ma", "ok", "na"],
            "evidence": ['{"k": [1]}', None, "{}", "{}"],
        }
    )
    failing = failing_cases([rows], 1).rows
    assert failing[["case_id", "severity"]].values.tolist() == [["a", "hard"], ["b", "report"]]
    assert failing["evidence"].tolist() == [{}, {"k": [1]}]
    transcripts = pd.DataFrame({"case_id": ["a", "a", "b"], "error": ["boom", "boom", None]})
    assert fault_counts(transcripts) == [{"turns": 2, "fault": "boom", "call_ids": []}]
    assert evidence_object("not json") == {"text": "not json"} and evidence_object({"a": 1}) == {"a": 1}


def test_faults_group_without_the_call_ids_a_gateway_appends_and_keep_every_id() -> None:
    fault = "TurnFault: HTTP 500 from http://gateway/v1: upstream exploded"
    errors = [f"{fault} [x-request-id: r{i}] [x-litellm-call-id: {i:04d}-call]" for i in range(200)]
    transcripts = pd.DataFrame({"case_id": [f"c{i}" for i in range(201)], "error": [*errors, "boom"]})
    grouped, other = fault_counts(transcripts)
    assert (grouped["turns"], grouped["fault"]) == (200, fault)
    assert len(grouped["call_ids"]) == 400 and grouped["call_ids"][:2] == [
        "x-request-id: r0",
        "x-litellm-call-id: 0000-call",
    ]
    assert fault_text(grouped) == (
        f"{fault} [x-request-id: r0, x-litellm-call-id: 0000-call, x-request-id: r1 and 397 more]"
    )
    assert other == {"turns": 1, "fault": "boom", "call_ids": []} and fault_text(other) == "boom"


def _history_file(root: Path, run_id: str, evidence: pa.Array) -> None:
    folder = root / "case_predicates" / "lane=l" / "date=2024-01-01"
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.table(
        {
            "run_id": [run_id],
            "lane": ["l"],
            "split": ["s"],
            "runtime": ["r"],
            "case_set": ["s"],
            "case_id": ["c"],
            "predicate": ["p"],
            "passed": [False],
            "severity": ["hard"],
            "code": ["x"],
            "message": ["m"],
            "evidence": evidence,
        }
    )
    pq.write_table(table, folder / f"{run_id}.parquet")
    manifests = root / "run_manifests" / "lane=l" / "date=2024-01-01"
    manifests.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        pa.table({"run_id": [run_id], "lane": ["l"], "split": ["s"], "runtime": ["r"], "case_set": ["s"]}),
        manifests / f"{run_id}.parquet",
    )


def test_evidence_is_json_in_history_and_old_text_evidence_still_reads(tmp_path: Path) -> None:
    _history_file(
        tmp_path, "aaaa1111-new", pa.array(['{"found": ["<pending>"]}'], type=pa.json_(pa.string()))
    )
    _history_file(tmp_path, "aaaa2222-old", pa.array(['{"found": ["..."]}'], type=pa.string()))
    with connect(str(tmp_path)) as con:
        rows = con.execute(
            "SELECT run_id, typeof(evidence), evidence->>'$.found[0]' FROM case_predicates ORDER BY run_id"
        ).fetchall()
        assert rows == [("aaaa1111-new", "JSON", "<pending>"), ("aaaa2222-old", "JSON", "...")]
        # Any unique prefix names a run; an ambiguous one names the candidates.
        assert resolve_run_id(con, "AAAA2") == "aaaa2222-old"
        with pytest.raises(KeyError, match="ambiguous: 2 runs match"):
            resolve_run_id(con, "aaaa")
        with pytest.raises(KeyError, match="no run 'bbbb'"):
            resolve_run_id(con, "bbbb")
    stored = pq.read_schema(
        tmp_path / "case_predicates" / "lane=l" / "date=2024-01-01" / "aaaa1111-new.parquet"
    )
    assert isinstance(stored.field("evidence").type, pa.JsonType)


def test_a_case_failing_in_several_samples_is_listed_once_with_its_sample_count() -> None:
    def row(case: str, sample: int, passed: bool) -> dict[str, object]:
        return {
            "case_id": case,
            "predicate": "no_dotted_inventory",
            "severity": "report",
            "passed": passed,
            "code": "dotted_inventory" if not passed else "ok",
            "message": f"dotted paths in sample {sample}",
            "evidence": None,
            "sample_index": sample,
        }

    table = pd.DataFrame(
        [row("a", 0, True), row("a", 1, False), row("a", 2, False), row("b", 0, False)]
        + [row("b", i, True) for i in (1, 2)]
    )
    failing = failing_cases([table], 3).rows
    assert failing[["case_id", "reason"]].values.tolist() == [
        ["a", "In 2 of 3 samples: dotted paths in sample 1"],  # the first failing sample's row
        ["b", "In 1 of 3 samples: dotted paths in sample 0"],
    ]
    one_sample = failing_cases([table[table["sample_index"] == 0]], 1).rows
    assert one_sample[["case_id", "reason"]].values.tolist() == [["b", "dotted paths in sample 0"]]


@pytest.mark.parametrize("samples", [1, 3])
def test_the_first_failing_rows_of_a_stage_file_are_those_of_the_whole_table(
    tmp_path: Path, samples: int
) -> None:
    """Read batch by batch (one batch without a failing row, one empty), with the long columns
    read and evidence decoded only for the rows shown: the same rows, counts, reasons and
    evidence as the whole table's, with one sample per case or several."""

    def rows(first: int, count: int, fail_every: int) -> pd.DataFrame:
        ids = [f"c{i:03d}" for i in range(first, first + count) for _ in range(2 * samples)]
        failing = [fail_every and (i // samples + i % samples) % fail_every == 0 for i in range(len(ids))]
        return pd.DataFrame(
            {
                "case_id": ids,
                "predicate": [p for p in "pq" for _ in range(samples)] * count,
                "passed": [not f for f in failing],
                "severity": ["report" if (i // samples) % 3 else "hard" for i in range(len(ids))],
                "code": ["bad" if f else "ok" for f in failing],
                "message": [f"m{i}" for i in range(len(ids))],
                "evidence": [f'{{"at": {i}}}' if f else "{}" for i, f in enumerate(failing)],
                "sample_index": [i % samples for i in range(len(ids))],
            }
        )

    batches = [rows(0, 20, 3), rows(20, 10, 0), rows(30, 0, 0), rows(30, 20, 4)]
    with StageWriter(CASE_PREDICATES, tmp_path) as writer:
        for batch in batches:
            writer.write(batch, run_id="r", lane="l", split="s", runtime="t", case_set="c")
        stored = writer.finish()
    whole = failing_cases([pd.concat(batches, ignore_index=True)], samples).rows
    assert whole["reason"].str.startswith("In ").all() == (samples > 1)
    for limit in (1, 5, 1000):
        shown = failing_cases(stored.batches(FAILING_READS), samples, limit, stored.batch)
        assert (shown.results, shown.cases) == (len(whole), whole["case_id"].nunique())
        assert shown.rows.to_dict("records") == whole.head(limit).to_dict("records")
