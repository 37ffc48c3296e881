"""What a runtime answers is recorded as it was: the seed the bot was given (in-process and in
workers), a reply's keys once each, a bot's bad text as that turn's fault, its print() never on
our stdout or the worker protocol."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from eval_pipeline.drive import drive
from eval_pipeline.lanes.kind import Thread, TurnRequest
from eval_pipeline.runtimes.registry import build_runtime
from eval_pipeline.runtimes.warm import warm_runtimes

BOTS = "python:eval_pipeline_tests.runtimes.bots"


def threads(count: int = 3) -> list[Thread]:
    return [
        Thread(case_id=f"case{i}", turns=(TurnRequest(turn_index=0, role="turn", prompt="Seed?"),))
        for i in range(count)
    ]


def driven(spec: str, options: dict[str, Any], **kwargs: Any) -> list[dict[str, Any]]:
    runtime = build_runtime(spec, options)
    try:
        return drive(runtime, threads(), concurrency=2, **kwargs).to_dict("records")
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
