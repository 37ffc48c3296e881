"""Lanes: their specs (lane.yaml), their kinds (scoring code) and discovery."""

from eval_pipeline.lanes.kind import (
    LaneKind,
    Thread,
    TurnRequest,
    known_kinds,
    lane_kind,
    register_lane_kind,
)
from eval_pipeline.lanes.registry import discover_lanes, find_lane
from eval_pipeline.lanes.spec import LaneSpec, ThresholdSpec, load_lane_spec

__all__ = [
    "LaneKind",
    "LaneSpec",
    "Thread",
    "ThresholdSpec",
    "TurnRequest",
    "discover_lanes",
    "find_lane",
    "known_kinds",
    "lane_kind",
    "load_lane_spec",
    "register_lane_kind",
]
