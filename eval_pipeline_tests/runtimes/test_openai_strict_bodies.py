"""An ``openai:`` reply is read by the strict JSON reader: a key twice is that turn's fault with
a clear message, never "the last one wins", whole or streamed, over real HTTP."""

from __future__ import annotations

from eval_pipeline.lanes.kind import Thread, TurnRequest
from eval_pipeline.run.drive import drive
from eval_pipeline.runtimes import build_runtime
from eval_pipeline_tests.runtimes.scripted_server import Scripted, chunk, event_stream, scripted

FIRST = b'[{"index": 0, "message": {"role": "assistant", "content": "I do not know that."}}]'
FORGED = b'[{"index": 0, "message": {"role": "assistant", "content": "Forged."}}]'
DUPLICATE_CHOICES = b'{"id": "x", "choices": ' + FIRST + b', "choices": ' + FORGED + b"}"


def turns_of(reply: Scripted, **options: object) -> list[dict[str, object]]:
    threads = [Thread(case_id="case", turns=(TurnRequest(turn_index=0, role="turn", prompt="Truth?"),))]
    with scripted(reply) as server:
        runtime = build_runtime(f"openai:{server.base_url}", {"model": "m", "max_retries": 0, **options})
        try:
            return drive(runtime, threads).to_dict("records")
        finally:
            runtime.close()


def test_a_body_naming_a_key_twice_is_the_turns_fault() -> None:
    (turn,) = turns_of(Scripted(body=DUPLICATE_CHOICES))
    assert turn["surface"] is None, turn  # neither answer is on record
    error = str(turn["error"])
    assert "malformed reply from POST http://127.0.0.1:" in error
    assert "the body: choices: duplicate key 'choices' in one object" in error, error


def test_a_streamed_chunk_naming_a_key_twice_is_the_turns_fault() -> None:
    duplicated = '{"choices": [{"index": 0, "delta": {"content": "A", "content": "B"}}]}'
    (turn,) = turns_of(event_stream([chunk({"content": "Tru"}), duplicated]), stream=True)
    assert turn["surface"] is None, turn
    assert "chunk 2: content: duplicate key 'content' in one object" in str(turn["error"]), turn["error"]


def test_a_body_starting_with_a_utf8_byte_order_mark_is_still_an_answer() -> None:
    body = b'\xef\xbb\xbf{"choices": ' + FIRST + b"}"
    (turn,) = turns_of(Scripted(body=body))
    assert (turn["surface"], turn["error"]) == ("I do not know that.", None)
