"""Lanes: their specs (lane.yaml), what scores them (a declaration or a kind) and discovery."""

from eval_pipeline.lanes.kind import LANE_KINDS, LaneKind, Thread, TurnRequest
from eval_pipeline.lanes.registry import declared_lane, discover_lanes, find_lane, lane_kind
from eval_pipeline.lanes.spec import LaneSpec, ThresholdSpec, load_lane_spec

__all__ = [
    "LANE_KINDS",
    "LaneKind",
    "LaneSpec",
    "Thread",
    "ThresholdSpec",
    "TurnRequest",
    "declared_lane",
    "discover_lanes",
    "find_lane",
    "lane_kind",
    "load_lane_spec",
]
