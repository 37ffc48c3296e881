"""Why generation stopped, per turn: ``finish_reason`` from plain and streamed ``openai:`` replies
lands in the transcripts and history; a predicate failing on an answer cut at the token limit
says so; the run's usage counts the cut turns."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.lanes import find_lane
from eval_pipeline.metrics.usage import TRUNCATED_TURNS, totals_text
from eval_pipeline.run.pipeline import evaluate_lane
from eval_pipeline.runtimes import build_runtime
from eval_pipeline_tests.paths import PROJECT_ROOT
from eval_pipeline_tests.runtimes.scripted_server import (
    Scripted,
    chunk,
    completion,
    event_stream,
    json_reply,
    scripted,
)

CUT = "Cut at the token limit (finish_reason=length)"
LANE = "deterministic_fluency"


def cut_reply(*, streamed: bool) -> Scripted:
    """An answer the server stopped at its token limit, mid-sentence."""
    if streamed:
        return event_stream(
            [
                chunk({"role": "assistant", "content": "Truth is what the evidence"}),
                chunk({}, finish_reason="length"),
            ]
        )
    return json_reply(completion({"content": "Truth is what the evidence"}, finish_reason="length"))


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
def test_a_cut_answer_is_recorded_and_its_failing_predicate_names_the_token_limit(streamed: bool) -> None:
    with scripted(cut_reply(streamed=streamed)) as server:
        runtime = build_runtime(f"openai:{server.base_url}", {"model": "m", "stream": streamed})
        try:
            run = evaluate_lane(find_lane(LANE), "public", runtime)
        finally:
            runtime.close()
    assert set(run.transcripts["finish_reason"]) == {"length"}
    failed = run.case_predicates[
        (run.case_predicates["predicate"] == "complete_punctuation")
        & (run.case_predicates["passed"] == False)  # noqa: E712
    ]
    assert len(failed) > 0
    assert all(message.startswith(CUT + ": The answer ends without") for message in failed["message"])
    usage = {value.metric: value.value for value in run.metric_values}
    assert usage[TRUNCATED_TURNS] == len(run.transcripts)


def test_an_answer_that_stopped_by_itself_says_nothing_of_a_limit() -> None:
    with scripted(json_reply(completion({"content": "Truth is what the evidence"}))) as server:
        runtime = build_runtime(f"openai:{server.base_url}", {"model": "m"})
        try:
            run = evaluate_lane(find_lane(LANE), "public", runtime)
        finally:
            runtime.close()
    assert set(run.transcripts["finish_reason"]) == {"stop"}
    failed = run.case_predicates[run.case_predicates["predicate"] == "complete_punctuation"]
    assert not failed["passed"].any()
    assert not any("token limit" in message for message in failed["message"])
    assert {value.metric: value.value for value in run.metric_values}[TRUNCATED_TURNS] == 0


def test_a_runtime_that_says_no_finish_reason_records_null() -> None:
    run = evaluate_lane(find_lane(LANE), "public", build_runtime("reference"))
    assert run.transcripts["finish_reason"].isna().all()


def test_the_run_summary_counts_the_cut_turns_and_history_keeps_the_finish_reason(history_root: Path) -> None:
    with scripted(cut_reply(streamed=False)) as server:
        result = CliRunner().invoke(
            app,
            [
                "run",
                "--lane",
                LANE,
                "--split",
                "public",
                "--runtime",
                f"openai:{server.base_url}",
                "-o",
                "model=m",
            ],
            env={"COLUMNS": "200"},
        )
    assert result.exit_code == 1, result.output  # the cut answers fail the lane
    assert "16 turns (0 from the cache, 16 cut at the token limit)" in result.output
    assert CUT in result.output
    reasons = duckdb.sql(
        f"SELECT DISTINCT finish_reason FROM read_parquet('{history_root}/transcripts/**/*.parquet', "
        "hive_partitioning = true, union_by_name = true)"
    ).fetchall()
    assert reasons == [("length",)]


def test_totals_say_the_cut_turns_only_when_there_are_some() -> None:
    usage = {
        "turns_driven": 10.0,
        "cached_turns": 0.0,
        "prompt_tokens": 5.0,
        "completion_tokens": 5.0,
        "cost": None,
    }
    assert "cut at" not in totals_text({**usage, TRUNCATED_TURNS: 0.0})
    assert totals_text({**usage, TRUNCATED_TURNS: 3.0}).startswith(
        "10 turns (0 from the cache, 3 cut at the token limit)"
    )


def test_an_i18n_assertion_failing_on_a_cut_translation_names_the_token_limit(tmp_path: Path) -> None:
    source = PROJECT_ROOT / "evals" / "i18n-prompt" / "cases" / "dev" / "placeholders.jsonl"
    cases = tmp_path / "cases.jsonl"
    cases.write_text(source.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    with scripted(cut_reply(streamed=False)) as server:
        runtime = build_runtime(f"openai:{server.base_url}", {"model": "m"})
        try:
            run = evaluate_lane(find_lane("i18n_prompt"), "dev", runtime, cases_path=cases)
        finally:
            runtime.close()
    failed = run.case_predicates[run.case_predicates["passed"] == False]  # noqa: E712
    assert len(failed) > 0
    assert all(message.startswith(CUT + ": ") for message in failed["message"])
    assert all('"finish_reason": "length"' in evidence for evidence in failed["evidence"])
