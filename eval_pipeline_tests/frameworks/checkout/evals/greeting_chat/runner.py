"""A chat-like lane: each case is played turn by turn; its detail carries the turns."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class LaneReport:
    metrics: dict[str, Any] = field(default_factory=dict)
    case_details: list[dict[str, Any]] = field(default_factory=list)


def _reply(prompt: str, gruff: bool) -> str:
    return f"hello, {prompt}" if not (gruff or prompt.startswith("!")) else prompt.lstrip("!")


def run_lane(cases: list[dict[str, Any]], *, config: Any = None, workers: int | None = None) -> LaneReport:
    state = Path(os.environ["FIXTURE_STATE_DIR"])
    left = sorted(p.name for p in state.iterdir())
    (state / "touched").write_text("x")  # a fresh folder each run: nothing is left from the last
    gruff = set(os.environ.get("FIXTURE_GRUFF", "").split(","))  # cases whose replies do not greet
    details = []
    for case in cases:
        replies = [_reply(p, case["id"] in gruff) for p in case["prompts"]]
        turns = [
            {"prompt": p, "surface": r, "index": i}
            for i, (p, r) in enumerate(zip(case["prompts"], replies, strict=True))
        ]
        greeted = all(t["surface"].startswith("hello") for t in turns)
        details.append(
            {
                "id": case["id"],
                "kind": case["kind"],
                "greeted": greeted,
                "polite": None if case["kind"] == "terse" else greeted,
                "turns": turns,
                "failure_reasons": [] if greeted else ["a reply did not greet"],
                "state_left": left,
            }
        )
    passed = sum(d["greeted"] for d in details)
    return LaneReport(
        metrics={
            "greet_rate": round(passed / len(details), 4) if details else None,
            "overall_pass": passed == len(details),
            "histogram": {"greeted": passed, "not": len(details) - passed},
            "lengths": [len(c["prompts"]) for c in cases],
        },
        case_details=details,
    )
