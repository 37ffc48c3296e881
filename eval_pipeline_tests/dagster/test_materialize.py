"""Materialize the fluency lane on a real Dagster instance (temp DAGSTER_HOME) and read history back."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from eval_pipeline.core.settings import history_root
from eval_pipeline.dagster_wiring.launch import ensure_instance, materialize_lane
from eval_pipeline.dagster_wiring.outcomes import LaneOutcome
from eval_pipeline.history import table_glob
from eval_pipeline.lanes import find_lane
from eval_pipeline.run.cases_stage import write_cases
from eval_pipeline.run.pipeline import evaluate_lane
from eval_pipeline.runtimes import build_runtime
from eval_pipeline.runtimes.targets import find_target
from eval_pipeline.tables.stage_files import StageFile
from eval_pipeline_tests.lane_requests import lane_request
from eval_pipeline_tests.runtimes.helpers import write_recording

pytestmark = pytest.mark.slow

DATE = "2026-11-30"


def run(
    runtime: str,
    split: str = "public",
    date: str = DATE,
    prepared_cases: StageFile | None = None,
    **kwargs: object,
) -> LaneOutcome:
    return materialize_lane(
        find_lane("deterministic_fluency"),
        find_target(runtime),
        lane_request(split, date, **kwargs),
        instance=ensure_instance(),
        prepared_cases=prepared_cases,
    )


def checks(outcome: LaneOutcome) -> dict[str, tuple[bool, str]]:
    return {c.name: (c.passed, c.severity) for c in outcome.checks}


def test_glossed_run_passes_every_check_and_no_gloss_fails_only_warn_checks() -> None:
    glossed = run("reference")
    assert glossed.success and glossed.failure is None
    assert all(passed for passed, _ in checks(glossed).values())

    bare = run("reference:no-gloss")
    assert bare.success and not bare.blocking_failures
    failed = {name: severity for name, (passed, severity) in checks(bare).items() if not passed}
    assert failed == {"no_provenance_only_rate": "WARN", "no_dotted_inventory_rate": "WARN"}

    metrics_glob = table_glob(history_root(), "metrics")
    rows = duckdb.sql(
        f"select run_id, runtime, value from read_parquet('{metrics_glob}', hive_partitioning = true) "
        "where metric = 'no_dotted_inventory_rate' and lane = 'deterministic_fluency' order by value"
    ).fetchall()
    assert [(r[0], r[1]) for r in rows] == [
        (bare.run_id, "reference-no-gloss"),
        (glossed.run_id, "reference"),
    ]
    assert rows[0][2] == pytest.approx(5 / 15)
    dates = duckdb.sql(
        f"select distinct date from read_parquet('{metrics_glob}', hive_partitioning = true)"
    ).fetchall()
    assert [str(d[0]) for d in dates] == [DATE]


def test_a_run_handed_its_cases_stage_file_takes_it_instead_of_writing_its_own(tmp_path: Path) -> None:
    """What ``run`` does: it writes each run's cases stage while checking the case files, and the
    run evaluates that file (here three of the split's cases), moved into the run's storage."""
    spec = find_lane("deterministic_fluency")
    three = tmp_path / "three.jsonl"
    three.write_text("".join(spec.case_files("public")[0].read_text().splitlines(keepends=True)[:3]))
    prepared = write_cases(spec, "public", three)
    outcome = run("reference", prepared_cases=prepared)
    assert outcome.success and outcome.turns_driven == 3
    assert not prepared.path.exists()


def test_materialization_records_metrics_as_numeric_metadata_per_series_and_history_per_table() -> None:
    outcome = run("reference")
    instance = ensure_instance()
    event = instance.get_latest_materialization_event(dg.AssetKey(["deterministic_fluency", "metrics"]))
    assert event is not None and event.asset_materialization is not None
    metadata = event.asset_materialization.metadata
    series = f"{outcome.case_set}|reference"  # the partition key: one plot line per series
    assert metadata[f"no_placeholder_rate · {series}"].value == 1.0
    assert isinstance(metadata[f"no_dotted_inventory_rate · {series}"], dg.FloatMetadataValue)
    assert "no_placeholder_rate" not in metadata  # a label shared by every series would zigzag
    for table in ("metrics", "case_predicates", "turn_verdicts", "transcripts"):
        files = list(Path(history_root()).glob(f"{table}/lane=deterministic_fluency/date={DATE}/*.parquet"))
        assert [f.stem for f in files] == [outcome.run_id], table


def test_a_failing_blocking_check_is_reported_with_its_cases(tmp_path: Path) -> None:
    recorded = write_recording(
        tmp_path / "turns.jsonl",
        [
            {"case_id": "fluency_dev_time_001", "surface": "Time is <pending>."},
            {"case_id": "fluency_dev_oov_zorblat_002", "surface": "I do not know that word yet"},
        ],
    )
    outcome = run(f"replay:{recorded}", split="dev")
    assert outcome.failure is None  # the run did its job: it measured and found failures
    blocking = {c.name for c in outcome.blocking_failures}
    assert {"no_placeholder_rate", "complete_punctuation_rate", "expected_predicates_pass_rate"} <= blocking
    # The run succeeded: it measured the runtime and found it failing (its checks say so); only
    # a run that broke fails in Dagster.
    assert outcome.success
    # History keeps the failing run too: it is a measurement, not an error.
    assert list(
        Path(history_root()).glob(f"metrics/lane=deterministic_fluency/date={DATE}/{outcome.run_id}.parquet")
    )


def test_cases_config_evaluates_another_file_under_the_lane_contract(tmp_path: Path) -> None:
    cases = tmp_path / "mine.jsonl"
    cases.write_text(
        json.dumps(
            {
                "id": "mine_001",
                "prompt": "What is trust?",
                "category": "pack_definition",
                "expected_predicates": ["no_placeholder"],
            }
        )
        + "\n",
        encoding="utf-8",
    )
    outcome = run("reference", split="dev", cases_path=str(cases))
    assert outcome.case_predicates is not None
    assert set(outcome.case_predicates["case_id"]) == {"mine_001"}


def test_bad_case_file_fails_the_cases_step_with_file_and_line(tmp_path: Path) -> None:
    cases = tmp_path / "bad.jsonl"
    cases.write_text('{"id": "x", "prompt": "What is trust?"}\n', encoding="utf-8")
    outcome = run("reference", split="dev", cases_path=str(cases))
    assert outcome.failure is not None and outcome.failure_kind == "CaseFileError"
    assert f"{cases}:1: category: required field is missing" in outcome.failure
    assert not Path(history_root()).exists() or not list(Path(history_root()).rglob("*.parquet"))


def test_regression_check_warns_when_the_same_runtime_gets_worse(tmp_path: Path) -> None:
    """Two nights of one runtime (the same replay path): glossed, then bare surfaces."""
    spec = find_lane("deterministic_fluency")
    recorded = tmp_path / "night.jsonl"
    columns = ["case_id", "turn_index", "prompt", "surface", "grounding_source", "surface_tag"]
    nights = []
    for mode in ("reference", "reference:no-gloss"):
        live = evaluate_lane(spec, "public", build_runtime(mode)).transcripts[columns]
        recorded.write_text(
            "\n".join(json.dumps(r) for r in live.to_dict("records")) + "\n", encoding="utf-8"
        )
        nights.append(run(f"replay:{recorded}"))
    first, second = ({c.name: c for c in night.checks} for night in nights)
    assert first["no_regression"].passed and second["no_regression"].severity == "WARN"
    assert not second["no_regression"].passed
    metadata = second["no_regression"].metadata  # the check evaluation's, as Dagster stored it
    assert set(metadata["regressed_metrics"]) == {
        "no_provenance_only_rate",
        "no_dotted_inventory_rate",
        "post_gloss_predicates_pass_rate",  # 0.9 → 0.0: the same nine cases, counted by their contract
    }
    assert metadata["previous_run_id"] == nights[0].run_id
    assert "fluency_truth_001" in metadata["flipped_case_ids"]
    paired = {row["metric"]: row for row in metadata["paired_counts"]}
    assert paired["no_dotted_inventory_rate"] == {
        "metric": "no_dotted_inventory_rate",
        "cases": 15,
        "turns": None,  # a rate over cases
        "worse": 9,
        "better": 0,
        "p_value": 0.5**9,  # one-sided exact McNemar
        "regressed": True,
    }
    assert paired["no_placeholder_rate"]["regressed"] is False
    # error_rate, paired on the turns both nights sent (the history asset's stage files): none faulted.
    turns = len(evaluate_lane(spec, "public", build_runtime("reference")).transcripts)
    assert {k: paired["error_rate"][k] for k in ("cases", "turns", "worse", "better", "regressed")} == {
        "cases": 15,
        "turns": turns,
        "worse": 0,
        "better": 0,
        "regressed": False,
    }


def test_monthly_compaction_job_keeps_every_run_queryable() -> None:
    from eval_pipeline.dagster_wiring.compaction import history_compaction_job
    from eval_pipeline.dagster_wiring.resources import HistoryResource
    from eval_pipeline.history import connect

    old = [run("reference", split="dev", date=day) for day in ("2026-10-01", "2026-10-02")]
    before = (
        connect(history_root()).execute("select run_id, metric, value from metrics order by all").fetchall()
    )
    result = history_compaction_job.execute_in_process(
        resources={"history": HistoryResource(root=history_root())}
    )
    assert result.success
    files = sorted(p.relative_to(history_root()).as_posix() for p in Path(history_root()).rglob("*.parquet"))
    assert "metrics/lane=deterministic_fluency/date=2026-10/compacted.parquet" in files
    assert not [f for f in files if "date=2026-10-0" in f]  # the per-run files of the closed month are gone
    after = (
        connect(history_root()).execute("select run_id, metric, value from metrics order by all").fetchall()
    )
    assert after == before and {r[0] for r in after} == {o.run_id for o in old}


def test_with_a_viewer_url_the_materialization_and_each_failed_check_link_to_the_run_page(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EVAL_PIPELINE_VIEWER_URL", "http://127.0.0.1:8765/")
    outcome = run("reference-no-gloss")
    page = f"http://127.0.0.1:8765/runs/{outcome.run_id}"
    event = ensure_instance().get_latest_materialization_event(
        dg.AssetKey(["deterministic_fluency", "metrics"])
    )
    assert event is not None and event.asset_materialization is not None
    assert event.asset_materialization.metadata["viewer"] == dg.MetadataValue.url(page)
    # The checks as Dagster stored them: a failed one links to the run's page, a passing one not.
    evaluations = [
        record.dagster_event.event_specific_data
        for record in ensure_instance().all_logs(
            outcome.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
        )
        if record.dagster_event is not None
    ]
    failed = [e for e in evaluations if not e.passed]
    assert failed and all(e.metadata["viewer"] == dg.MetadataValue.url(page) for e in failed)
    assert all("viewer" not in e.metadata for e in evaluations if e.passed and e.check_name != "measurement")
