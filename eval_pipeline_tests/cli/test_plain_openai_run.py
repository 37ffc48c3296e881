"""A plain ``openai:`` run (no ``response_fields``) against a server that sends none of the
reference runtime's fields records them as not supplied (null, never a made-up ``none``), and
the run says which ones and how to map them. Against ``serve-reference`` the same plain run
reads them beside ``content``: ``test_adapters_match_reference`` holds its tables to the
reference runtime's, and ``test_serve_reference`` runs the command it prints."""

from __future__ import annotations

from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.lanes.kind import Thread, TurnRequest
from eval_pipeline.run.drive import drive
from eval_pipeline.runtimes import build_runtime
from eval_pipeline_tests.runtimes.scripted_server import completion, json_reply, scripted

# What a third-party server sends: the text, nothing of the reference runtime's fields.
PLAIN = json_reply(completion({"content": "Truth is the property of a statement that fits the facts."}))


def test_a_server_that_sends_no_such_field_is_recorded_as_not_supplying_it() -> None:
    threads = [Thread(case_id="case", turns=(TurnRequest(turn_index=0, role="turn", prompt="Truth?"),))]
    with scripted(PLAIN) as server:
        runtime = build_runtime(f"openai:{server.base_url}", {"model": "m", "max_retries": 0})
        try:
            (turn,) = drive(runtime, threads).to_dict("records")
        finally:
            runtime.close()
    assert turn["error"] is None and turn["surface"].startswith("Truth is")
    assert (turn["grounding_source"], turn["surface_tag"], turn["epistemic_status"]) == (None, None, None)


def test_the_run_names_in_one_line_the_predicates_that_read_na_and_how_to_map_their_fields() -> None:
    with scripted(PLAIN) as server:
        result = CliRunner().invoke(
            app,
            [
                *("run", "--lane", "deterministic_fluency", "--split", "dev"),
                *("--runtime", f"openai:{server.base_url}", "-o", "model=m", "-o", "max_retries=0"),
            ],
            env={"COLUMNS": "100"},
        )
    assert result.exit_code in (0, 1), result.output
    text = " ".join(result.stdout.split())
    assert (
        "n/a without runtime telemetry: surface_provenance_match (it reads grounding_source, surface_tag, "
        "which the runtime never supplied); map them to the response with "
        """-o 'response_fields={"grounding_source": "<dotted path>"}' """
        "(default path: choices.0.message.grounding_source)"
    ) in text, result.stdout
    assert text.count("without runtime telemetry") == 1, result.stdout


def test_a_lane_none_of_whose_predicates_reads_a_field_says_nothing_of_it() -> None:
    # refusal_calibration and i18n_prompt read the surface only; the thread lane reads
    # grounding_source alone, and names the predicates that do.
    said: dict[str, str] = {}
    with scripted(PLAIN) as server:
        for lane, split in (
            ("refusal_calibration", "dev"),
            ("i18n_prompt", "dev"),
            ("conversational_thread_coherence", "dev"),
        ):
            result = CliRunner().invoke(
                app,
                [
                    *("run", "--lane", lane, "--split", split),
                    *("--runtime", f"openai:{server.base_url}", "-o", "model=m", "-o", "max_retries=0"),
                ],
                env={"COLUMNS": "200"},
            )
            assert result.exit_code in (0, 1), result.output
            said[lane] = " ".join(result.stdout.split())
    assert "never supplied" not in said["refusal_calibration"]
    assert "never supplied" not in said["i18n_prompt"]
    assert (
        "n/a without runtime telemetry: is_grounded, no_topic_drift_to_none (they read grounding_source, "
        "which the runtime never supplied)"
    ) in said["conversational_thread_coherence"]
    assert "surface_tag" not in said["conversational_thread_coherence"]
