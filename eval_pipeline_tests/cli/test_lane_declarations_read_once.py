"""`eval-pipeline run` reads the lanes' declarations once per invocation, however many lanes it
runs: what each lane's predicates read (for the "not supplied" note) comes from the specs it has."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app, lane_runs
from eval_pipeline.lanes import registry


@pytest.mark.slow
def test_a_run_of_two_lanes_reads_the_lane_declarations_once(monkeypatch: pytest.MonkeyPatch) -> None:
    real = registry.discover_lanes
    reads: list[object] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(registry, "discover_lanes", counted)
    monkeypatch.setattr(lane_runs, "discover_lanes", counted)
    lanes = ["--lane", "deterministic_fluency", "--lane", "articulation_of_status"]
    result = CliRunner().invoke(app, ["run", *lanes, "--split", "dev"])
    assert result.exit_code in (0, 1), result.stderr  # 1: a blocking check failed; either is a run
    assert result.stdout.count("usage:") >= 2  # both lane runs were printed
    assert len(reads) == 1
