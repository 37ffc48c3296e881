"""Shared pieces of the runtime adapter tests: lanes to cover, table comparison, a served reference."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from eval_pipeline.lanes.registry import discover_lanes
from eval_pipeline.lanes.spec import LaneSpec
from eval_pipeline.metrics.usage import USAGE_METRICS
from eval_pipeline.run.pipeline import LaneRun
from eval_pipeline.runtimes.serve import ReferenceServer, ServeConfig

# What a runtime decides; latency, attempts and raw legitimately differ between adapters.
ANSWER_COLUMNS = [
    "case_id",
    "turn_index",
    "role",
    "prompt",
    "surface",
    "grounding_source",
    "surface_tag",
    "epistemic_status",
    "error",
]


def write_recording(path: Path, turns: Iterable[dict[str, Any]]) -> Path:
    """A replay file at ``path``: one recorded turn per line."""
    path.write_text("".join(json.dumps(turn) + "\n" for turn in turns), encoding="utf-8")
    return path


def lanes() -> list[LaneSpec]:
    return discover_lanes()


def split_of(spec: LaneSpec) -> str:
    """The split the adapter tests evaluate: dev when the lane has one (small), else the first."""
    return "dev" if "dev" in spec.splits else next(iter(spec.splits))


def assert_same_tables(run: LaneRun, reference: LaneRun, *, telemetry: bool = True) -> None:
    """The run's tables are the reference's. With ``telemetry=False`` (an adapter that carries no
    turn-log telemetry: replay files, OpenAI-compatible servers) the telemetry verdicts must be
    "not applicable" and everything else equal."""
    pd.testing.assert_frame_equal(run.transcripts[ANSWER_COLUMNS], reference.transcripts[ANSWER_COLUMNS])
    turns, reference_turns = run.turn_predicates, reference.turn_predicates
    # Usage (latency, tokens) is how the answers were got, not what they were: adapters differ.
    metrics = run.metrics[~run.metrics["metric"].isin(USAGE_METRICS)].reset_index(drop=True)
    reference_metrics = reference.metrics[~reference.metrics["metric"].isin(USAGE_METRICS)].reset_index(
        drop=True
    )
    if not telemetry:
        untold = turns["predicate"] == "telemetry_match"
        assert turns.loc[untold, "passed"].isna().all() and set(turns.loc[untold, "code"]) <= {"no_telemetry"}
        turns = turns[~untold].reset_index(drop=True)
        reference_turns = reference_turns[reference_turns["predicate"] != "telemetry_match"].reset_index(
            drop=True
        )
        rate = metrics["metric"] == "telemetry_consistency_rate"
        assert metrics.loc[rate, "value"].isna().all()
        metrics = metrics[~rate].reset_index(drop=True)
        reference_metrics = reference_metrics[
            reference_metrics["metric"] != "telemetry_consistency_rate"
        ].reset_index(drop=True)
    pd.testing.assert_frame_equal(turns, reference_turns)
    pd.testing.assert_frame_equal(run.case_predicates, reference.case_predicates)
    pd.testing.assert_frame_equal(metrics, reference_metrics)


@contextmanager
def served_reference(config: ServeConfig | None = None) -> Iterator[ReferenceServer]:
    server = ReferenceServer(0, config).start_background()
    try:
        yield server
    finally:
        server.stop()
