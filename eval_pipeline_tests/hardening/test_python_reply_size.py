"""A ``python:`` bot's answer is capped like an ``exec:`` or ``openai:`` reply: one over
``max_reply_bytes`` (1 MB) is that turn's ``reply_too_large`` fault, in-process and in worker
processes alike, so a bot answering 95 MB a turn cannot take the run's memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipeline.runtimes import build_runtime
from eval_pipeline.runtimes.faults import TurnFault

BOT = """
def chat(prompt):
    return {"surface": "x" * int(prompt), "grounding_source": "pack"}
"""


@pytest.mark.parametrize("workers", [0, 1])
def test_an_answer_over_max_reply_bytes_is_the_turns_fault(tmp_path: Path, workers: int) -> None:
    (tmp_path / "sizebot.py").write_text(BOT, encoding="utf-8")
    options = {"paths": [str(tmp_path)], "target": "chat", "workers": workers}
    runtime = build_runtime("python:sizebot:chat", options)
    try:
        session = runtime.open_session("s")
        assert session.send("900000").surface == "x" * 900_000
        with pytest.raises(TurnFault, match=r"^reply_too_large: ") as raised:
            session.send("2000000")
        assert raised.value.kind == "reply_too_large"
    finally:
        runtime.close()
    wider = build_runtime("python:sizebot:chat", {**options, "max_reply_bytes": 3_000_000})
    try:
        assert len(wider.open_session("s").send("2000000").surface) == 2_000_000
    finally:
        wider.close()
