"""A run launched without the command line (the launchpad's run config, a schedule) meets the
same budget decision in its transcripts stage: a cost budget for a target with no price is
refused there, before the runtime is sent a turn."""

from __future__ import annotations

import pytest

from eval_pipeline.dagster_wiring.launch import ensure_instance, materialize_lane
from eval_pipeline.lanes import find_lane
from eval_pipeline.runtimes.targets import find_target
from eval_pipeline_tests.lane_requests import lane_request

pytestmark = pytest.mark.slow


def test_a_cost_budget_for_an_unpriced_target_fails_the_transcripts_stage() -> None:
    outcome = materialize_lane(
        find_lane("deterministic_fluency"),
        find_target("reference"),
        lane_request("public", "2026-11-30", max_cost=1.0),
        instance=ensure_instance(),
    )
    assert not outcome.success
    assert outcome.failure is not None and "'reference' has no price:" in outcome.failure
    assert outcome.outcome is None  # nothing was measured
