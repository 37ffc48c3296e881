"""Every table a lane split produces on a runtime, as JSON-ready records (the port fixtures).

``python -m eval_pipeline_tests.lanes.lane_outputs LANE...`` rewrites the fixtures of those
lanes from the current code; the port test compares the current code with what is committed.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from eval_pipeline.lanes import find_lane
from eval_pipeline.run.pipeline import evaluate_lane
from eval_pipeline.runtimes import build_runtime

FIXTURES = Path(__file__).parent.parent / "fixtures" / "lane_outputs"
RUNTIMES: tuple[str, ...] = ("reference", "reference:no-gloss")
TABLES: tuple[str, ...] = ("transcripts", "turn_predicates", "case_predicates", "metrics")
# Wall-clock columns differ on every run; everything else must not.
VOLATILE = {"latency_ms"}


def records(table: pd.DataFrame) -> list[dict[str, Any]]:
    rows = table.drop(columns=[c for c in VOLATILE if c in table.columns]).to_dict("records")
    return [{k: _plain(v) for k, v in row.items()} for row in rows]


def _plain(value: Any) -> Any:
    if value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and math.isnan(value)):
        return None
    if hasattr(value, "item"):
        return value.item()
    return value


def lane_outputs(lane: str, split: str, runtime: str) -> dict[str, list[dict[str, Any]]]:
    run = evaluate_lane(find_lane(lane), split, build_runtime(runtime))
    return {name: records(getattr(run, name)) for name in TABLES}


def fixture_path(lane: str, split: str, runtime: str) -> Path:
    return FIXTURES / f"{lane}.{split}.{runtime.replace(':', '-')}.json"


def write_fixtures(lane: str) -> list[Path]:
    written: list[Path] = []
    for split in find_lane(lane).splits:
        for runtime in RUNTIMES:
            path = fixture_path(lane, split, runtime)
            path.parent.mkdir(parents=True, exist_ok=True)
            text = json.dumps(
                lane_outputs(lane, split, runtime), indent=1, sort_keys=True, ensure_ascii=False
            )
            path.write_text(text + "\n", encoding="utf-8")
            written.append(path)
    return written


if __name__ == "__main__":
    for name in sys.argv[1:]:
        for written in write_fixtures(name):
            print(written)
