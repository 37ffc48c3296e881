"""A replay runtime through the session protocol (a caller that sends turn by turn) answers as
the one join drive uses does: the recorded answer, the recorded fault, and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipeline.runtimes.adapters.replay import RecordedFault
from eval_pipeline.runtimes.base import RuntimeSpecError
from eval_pipeline.runtimes.registry import build_runtime
from eval_pipeline_tests.runtimes.helpers import write_recording


def test_a_session_answers_each_recorded_turn_in_order_and_replays_a_fault(tmp_path: Path) -> None:
    recorded = write_recording(
        tmp_path / "turns.jsonl",
        [
            {"case_id": "a", "turn_index": 0, "prompt": "Hi?", "surface": "Hello.", "seed": 7},
            {"case_id": "a", "turn_index": 1, "raw": '{"attempts": 3, "usage": 2}', "surface": "Again."},
            {"case_id": "a", "turn_index": 2, "error": "TimeoutError: late"},
        ],
    )
    session = build_runtime(f"replay:{recorded}").open_session("a")
    first = session.send("Hi?")
    assert (first.surface, first.raw) == ("Hello.", {"seed": 7})
    second = session.send("anything: no prompt was recorded")
    assert (second.surface, second.raw) == ("Again.", {"attempts": 3, "usage": 2})
    with pytest.raises(RecordedFault, match=r"^TimeoutError: late$"):
        session.send("third")
    with pytest.raises(RuntimeSpecError, match="no recorded turn 3 for case 'a'"):
        session.send("fourth")


def test_a_session_refuses_a_prompt_other_than_the_recorded_one(tmp_path: Path) -> None:
    recorded = write_recording(tmp_path / "turns.jsonl", [{"case_id": "a", "prompt": "Hi?", "surface": "x."}])
    with pytest.raises(
        RuntimeSpecError, match="recorded prompt 'Hi\\?' differs from the case's prompt 'Yo\\?'"
    ):
        build_runtime(f"replay:{recorded}").open_session("a").send("Yo?")
