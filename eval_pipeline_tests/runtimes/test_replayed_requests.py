"""A recording is asked the turns a lane's threads send, as a table: a kind that builds that
table itself (a declared lane, without a model per turn) gives exactly its threads' turns,
and a recording is asked them in the order drive sends them, each with the seed drive derives."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest
from pydantic import ValidationError

from eval_pipeline.lanes.declaration import FieldSpec
from eval_pipeline.lanes.declared import DeclaredLane, _stored_type
from eval_pipeline.lanes.kind import Thread, TurnRequest, requests_of_threads, turn_requests
from eval_pipeline.lanes.registry import discover_lanes, lane_kind
from eval_pipeline.lanes.spec import LaneSpec
from eval_pipeline.metrics.samples import derive_seed
from eval_pipeline.run.cases_stage import cases_frame
from eval_pipeline.run.drive import replayed, sessions_of
from eval_pipeline.run.pipeline import cases_from_frame, load_split
from eval_pipeline.runtimes.adapters.replay import ANSWERS


@pytest.mark.parametrize("spec", discover_lanes(), ids=lambda s: s.name)
def test_a_kinds_turn_table_is_its_threads_turns(spec: LaneSpec) -> None:
    kind = lane_kind(spec)
    for split in spec.splits:
        loaded = load_split(spec, split)
        models = [item.case for item in loaded]
        expected = requests_of_threads(kind.threads(models, spec, split))
        assert expected.num_rows > 0
        batch = cases_from_frame(kind, cases_frame(loaded, split))
        for cases in (models, batch):
            assert turn_requests(kind, cases, spec, split).equals(expected), (spec.name, split)
        if isinstance(kind, DeclaredLane):  # every shipped source is text: Arrow reads the batch
            assert kind.turn_table(batch, spec, split) is not None


TRICKY = ["Qu'est-ce que \u00e9?", 'a "quoted" \\ back', "emoji \U0001f600 and \u2028 sep", "tab\tnew"]


@pytest.mark.parametrize("lane", ["deterministic_fluency", "conversational_thread_coherence"])
def test_turns_read_by_arrow_are_the_turns_of_the_threads(lane: str, tmp_path: Path) -> None:
    """Cases of every shape a source takes (no set-up, several, a list of turn objects of any
    length) with texts JSON escapes: Arrow's reading of the stored JSON gives the threads' turns."""
    spec = next(s for s in discover_lanes() if s.name == lane)
    kind = lane_kind(spec)
    assert isinstance(kind, DeclaredLane)
    model = load_split(spec, "public")[0].case
    lines = []
    for i in range(60):
        case = {**model.model_dump(mode="json"), "id": f"case_{i:03d}"}
        text = f"{TRICKY[i % len(TRICKY)]} {i}"
        if lane == "deterministic_fluency":
            case.update(prompt=text, setup=[f"{TRICKY[j % 4]} set-up {j}" for j in range(i % 4)])
        else:
            turns = case["turns"]
            case["turns"] = [
                {**turns[j % len(turns)], "prompt": f"{text} turn {j}"} for j in range(8 + i % 5)
            ]
        lines.append(json.dumps(case, ensure_ascii=i % 2 == 0))
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    loaded = load_split(spec, "public", path)
    batch = cases_from_frame(kind, cases_frame(loaded, "public"))
    read = kind.turn_table(batch, spec, "public")
    assert read is not None
    assert read.equals(requests_of_threads(kind.threads([item.case for item in loaded], spec, "public")))


def test_a_prompt_that_is_not_text_is_refused_as_building_its_thread_refuses_it() -> None:
    spec = next(s for s in discover_lanes() if s.name == "deterministic_fluency")
    kind = lane_kind(spec)
    assert isinstance(kind, DeclaredLane)
    case = load_split(spec, "public")[0].case
    cases = [case, SimpleNamespace(**{**dict(case), "id": "b", "prompt": 5})]  # a case of no schema
    assert kind.turn_table(cases, spec, "public") is None
    with pytest.raises(ValidationError, match="prompt"):
        turn_requests(kind, cases, spec, "public")


def _threads() -> list[Thread]:
    """Threads of fresh sessions and of two warm ones, interleaved."""

    def thread(case_id: str, session: str | None, turns: int) -> Thread:
        asked = tuple(TurnRequest(turn_index=i, role="turn", prompt=f"{case_id}:{i}") for i in range(turns))
        return Thread(case_id=case_id, turns=asked, session=session)

    return [
        thread("e", None, 2),
        thread("b", "warm-1", 1),
        thread("a", None, 1),
        thread("d", "warm-2", 2),
        thread("c", "warm-1", 2),
    ]


def _answering(asked: list[pa.Table]) -> Any:
    """A recording that answers every turn with its prompt and records nothing else, and keeps
    what it was asked."""

    def answers(requests: pa.Table) -> pa.Table:
        asked.append(requests)
        n = requests.num_rows
        columns: dict[str, Any] = {name: pa.nulls(n, pa.string()) for name in ANSWERS}
        columns.update(surface=requests["prompt"], attempts=pa.repeat(1, n), seed=pa.nulls(n, pa.int64()))
        return pa.table(columns)

    return answers


@pytest.mark.parametrize("seed", [None, 7])
def test_a_recording_is_asked_in_sending_order_with_the_seeds_drive_derives(seed: int | None) -> None:
    threads = _threads()
    asked: list[pa.Table] = []
    transcripts = replayed(_answering(asked), requests_of_threads(threads), repeat=2, seed=seed)

    sent = [
        (thread.case_id, sample, turn.turn_index)
        for sample in range(2)
        for session in sessions_of(threads)
        for thread in session
        for turn in thread.turns
    ]
    (request,) = asked
    key = request.select(["case_id", "sample_index", "turn_index"]).to_pylist()
    assert [tuple(row.values()) for row in key] == sent

    rows = transcripts.to_pylist()
    assert [(r["case_id"], r["sample_index"], r["turn_index"]) for r in rows] == sorted(sent)
    assert all(r["surface"] == f"{r['case_id']}:{r['turn_index']}" for r in rows)
    assert all(r["latency_ms"] is None for r in rows)
    session_of = {t.case_id: t.session or t.case_id for t in threads}
    assert [r["seed"] for r in rows] == [
        None if seed is None else derive_seed(seed, session_of[r["case_id"]], r["sample_index"]) for r in rows
    ]


def test_only_text_and_objects_with_a_text_prompt_are_read_by_arrow() -> None:
    """A source field Arrow reads: text (an enum too), a list of texts, an object's text prompt
    or a list of such objects; a list of lists, a number or an object without the prompt field
    is built the model's way (which says why a prompt is not text)."""
    text, number = FieldSpec(type="str"), FieldSpec(type="int")
    turn = FieldSpec(type="object", fields={"prompt": text, "n": number})
    assert _stored_type(text, None) == pa.string()
    assert _stored_type(FieldSpec(enum=["a", "b"]), None) == pa.string()
    assert _stored_type(FieldSpec(type="list", items=text), None) == pa.list_(pa.string())
    assert _stored_type(FieldSpec(type="list", items=turn), "prompt") == pa.list_(
        pa.struct([("prompt", pa.string())])
    )
    for field, prompt in [
        (FieldSpec(type="list", items=FieldSpec(type="list", items=text)), None),
        (number, None),
        (turn, None),
        (turn, "n"),
        (turn, "missing"),
        (None, None),
    ]:
        assert _stored_type(field, prompt) is None, (field, prompt)
