"""What a runtime answers is recorded as it was: the seed the bot was given (in-process and in
workers), a reply's keys once each, a bot's bad text as that turn's fault, its print() never on
our stdout or the worker protocol."""

from __future__ import annotations

import contextlib
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.core.settings import history_root
from eval_pipeline.history import connect
from eval_pipeline.lanes.kind import Thread, TurnRequest
from eval_pipeline.run.drive import Sending, drive
from eval_pipeline.runtimes.registry import build_runtime
from eval_pipeline.runtimes.warm import warm_runtimes
from eval_pipeline_tests.paths import PROJECT_ROOT

BOTS = "python:eval_pipeline_tests.runtimes.bots"
UNRULY = f"{BOTS}:make_unruly_bot"


def threads(count: int = 3) -> list[Thread]:
    return [
        Thread(case_id=f"case{i}", turns=(TurnRequest(turn_index=0, role="turn", prompt="Seed?"),))
        for i in range(count)
    ]


def driven(spec: str, options: dict[str, Any], concurrency: int = 2, **kwargs: Any) -> list[dict[str, Any]]:
    runtime = build_runtime(spec, options)
    try:
        return drive(runtime, threads(), Sending(concurrency=concurrency, **kwargs)).to_dict("records")
    finally:
        runtime.close()


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("workers", [0, 2])
def test_the_bot_gets_the_seed_the_transcript_records(workers: int, shared: bool) -> None:
    with warm_runtimes() if shared else contextlib.nullcontext():
        rows = driven(f"{BOTS}:make_seeded_bot", {"workers": workers}, seed=7, repeat=2)
    assert len(rows) == 6 and all(row["error"] is None for row in rows), rows
    for row in rows:
        assert row["seed"] is not None
        assert row["surface"] == f"My seed is {row['seed']}.", row


DUPLICATE_SURFACE_CHILD = """
import json, sys
for line in sys.stdin:
    request = json.loads(line)
    sys.stdout.write('{"id": %s, "surface": "I do not know that.", "surface": "forged"}\\n' % json.dumps(request["id"]))
    sys.stdout.flush()
"""


def test_an_exec_reply_naming_a_key_twice_is_malformed_not_its_last_value() -> None:
    rows = driven("exec:" + shlex.join([sys.executable, "-c", DUPLICATE_SURFACE_CHILD]), {}, concurrency=1)
    assert [row["surface"] for row in rows] == [None, None, None]
    assert all(
        row["error"].startswith("TurnFault: malformed_reply: surface: duplicate key 'surface'")
        for row in rows
    ), rows


@pytest.mark.parametrize("workers", [0, 2])
def test_a_bots_bad_text_is_its_turns_fault_and_its_prints_go_to_stderr(workers: int) -> None:
    runtime = build_runtime(f"{BOTS}:make_unruly_bot", {"workers": workers})
    asked = [
        Thread(case_id=f"case{i}", turns=(TurnRequest(turn_index=0, role="turn", prompt=prompt),))
        for i, prompt in enumerate(["Hello?", "SURROGATE please", "Again?"])
    ]
    try:
        rows = drive(runtime, asked, Sending(concurrency=2)).to_dict("records")
    finally:
        runtime.close()
    assert [row["surface"] for row in rows] == ["You asked: Hello?", None, "You asked: Again?"]
    assert "malformed_reply" in rows[1]["error"] and "lone surrogate" in rows[1]["error"]


@pytest.mark.slow
def test_a_printing_bot_leaves_run_json_intact_and_a_surrogate_costs_one_turn(tmp_path: Path) -> None:
    source = (PROJECT_ROOT / "evals" / "deterministic_fluency" / "dev" / "cases.jsonl").read_text(
        encoding="utf-8"
    )
    lines = source.splitlines()[:3]
    lines[1] = lines[1].replace('"prompt": "', '"prompt": "SURROGATE ', 1)
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = CliRunner().invoke(
        app,
        [*("run", "--lane", "deterministic_fluency", "--cases", str(cases), "--json"), "--runtime", UNRULY],
    )
    assert result.exit_code in (0, 1, 4), (result.exit_code, result.stderr, result.exception)
    document = json.loads(result.stdout)  # nothing the bot printed is in it
    (lane,) = document["lanes"]
    assert [fault["turns"] for fault in lane["faults"]] == [1] and "lone surrogate" in lane["faults"][0][
        "fault"
    ]
    assert "thinking about" in result.stderr
    runs = connect(str(history_root())).sql("select count(*) from runs").fetchall()
    assert runs == [(1,)]  # the run was recorded, its bad turn a fault
