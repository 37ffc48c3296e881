"""``timeout_s`` is a deadline for the whole turn, whatever the runtime does: a real server on
127.0.0.1 that drips its reply one byte every 0.5 s or 2 s is cut off at ``timeout_s`` (within
10 %), through ``openai:``, a ``python:`` bot in-process and a ``python:`` bot in workers."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.cases.jsonl import MAX_LINE_BYTES
from eval_pipeline.lanes.kind import Thread, TurnRequest
from eval_pipeline.run.drive import drive
from eval_pipeline.runtimes.registry import build_runtime
from eval_pipeline_tests.fuzz.bounded_cli import run_cli
from eval_pipeline_tests.runtimes.scripted_server import Scripted, completion, scripted

TIMEOUT_S = 3.0
TOLERANCE = 0.10
TEST_BOUND_S = 30.0


def dripping(every_s: float) -> Scripted:
    """A whole completion, sent one byte every ``every_s`` seconds (it would take minutes)."""
    body = json.dumps(completion({"content": "An answer that arrives far too slowly."})).encode()
    return Scripted(pieces=tuple((every_s, body[i : i + 1]) for i in range(len(body))))


def one_turn(spec: str, options: dict[str, Any]) -> dict[str, Any]:
    """The transcript row of one turn sent through ``spec`` (built, driven and closed); the test
    gives up after TEST_BOUND_S, so a deadline that does not hold fails instead of hanging."""
    rows: list[dict[str, Any]] = []

    def turn() -> None:
        runtime = build_runtime(spec, options)
        try:
            thread = Thread(case_id="slow", turns=(TurnRequest(turn_index=0, role="turn", prompt="Well?"),))
            rows.extend(drive(runtime, [thread]).to_dict("records"))
        finally:
            runtime.close()

    within(TEST_BOUND_S, turn)
    (row,) = rows
    return row


def within(seconds: float, body: Callable[[], None]) -> None:
    """Run ``body`` on a daemon thread; fail (instead of hanging) if it has not ended in ``seconds``,
    and re-raise what it raised."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            body()
        except BaseException as exc:
            raised.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds:g}s"
    if raised:
        raise raised[0]


def assert_cut_off_at_the_deadline(row: dict[str, Any]) -> None:
    assert row["surface"] is None and ("timed out" in row["error"] or "timeout" in row["error"]), row
    assert TIMEOUT_S <= row["latency_ms"] / 1000.0 <= TIMEOUT_S * (1 + TOLERANCE), row["latency_ms"]


@pytest.mark.parametrize("every_s", [0.5, 2.0])
def test_openai_timeout_bounds_the_whole_request(every_s: float) -> None:
    with scripted(dripping(every_s)) as server:
        row = one_turn(f"openai:{server.base_url}", {"model": "m", "timeout_s": TIMEOUT_S, "max_retries": 0})
    assert_cut_off_at_the_deadline(row)
    assert row["attempts"] == 1


@pytest.mark.parametrize("workers", [0, 1])
@pytest.mark.parametrize("every_s", [0.5, 2.0])
def test_a_python_bot_waiting_on_a_dripping_server_is_cut_off(every_s: float, workers: int) -> None:
    with scripted(dripping(every_s)) as server:
        options = {"kwargs": {"url": server.base_url}, "timeout_s": TIMEOUT_S, "workers": workers}
        row = one_turn("python:eval_pipeline_tests.runtimes.drip_bot:make", options)
    assert_cut_off_at_the_deadline(row)


def test_a_hung_in_process_turn_loses_the_rest_of_its_session_only() -> None:
    with scripted(dripping(2.0)) as server:
        within(TEST_BOUND_S, lambda: hung_session(server.base_url))


def hung_session(url: str) -> None:
    """A bot whose first turn hangs: a timeout fault at 1 s, then session_lost at once."""
    runtime = build_runtime(
        "python:eval_pipeline_tests.runtimes.drip_bot:make",
        {"kwargs": {"url": url}, "timeout_s": 1.0},
    )
    session = runtime.open_session("slow")
    started = time.monotonic()
    with pytest.raises(Exception, match="timeout: no answer within 1s"):
        session.send("first")
    with pytest.raises(Exception, match="session_lost"):
        session.send("second")
    assert time.monotonic() - started < 1.5
    session.close()
    runtime.close()


@pytest.mark.slow
@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_case_file_that_never_ends_is_bad_input(command: str, tmp_path: Path) -> None:
    args = {
        "validate": ["validate", "--lane", "deterministic_fluency", "/dev/zero"],
        "run": ["run", "--lane", "deterministic_fluency", "--cases", "/dev/zero"],
    }[command]
    result = run_cli(args, deadline_s=60)
    assert result.violations(60) == [], (result.exit_code, result.stderr[-2000:])
    assert result.exit_code == 2
    assert "/dev/zero:0: (file): not a regular file" in result.stderr


def test_a_line_without_end_is_one_problem_and_the_rest_is_not_read(tmp_path: Path) -> None:
    endless = tmp_path / "endless.jsonl"
    with endless.open("wb") as handle:
        handle.write(b'{"id": "a"}\n')
        handle.write(b"x" * (MAX_LINE_BYTES + 10))
    result = run_cli(["validate", "--lane", "deterministic_fluency", str(endless)], deadline_s=60)
    assert result.violations(60) == [], (result.exit_code, result.stderr[-2000:])
    assert f"{endless}:2: (line): longer than 16 MB; the rest of the file was not read" in result.stderr
