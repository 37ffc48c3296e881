"""``compare`` without ``--lane``: the only lane both runtimes ran, as the README's example writes it."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.run.pipeline import LaneRun

from .conftest import LANE, StoredRun, record_run

runner = CliRunner()


def test_compare_takes_the_only_lane_both_runtimes_ran(
    history_root: Path, lane_runs: dict[bool, LaneRun]
) -> None:
    root = str(history_root)
    for stored in (
        StoredRun("run-g", "reference", "2024-05-01", True),
        StoredRun("run-n", "other", "2024-05-01", False),
    ):
        record_run(root, lane_runs[stored.glossed], stored)
    result = runner.invoke(app, ["compare", "--runtime", "reference", "--runtime", "other", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["lane"] == LANE and (document["a"]["run_id"], document["b"]["run_id"]) == (
        "run-g",
        "run-n",
    )

    result = runner.invoke(app, ["compare", "--runtime", "reference", "--runtime", "nobody"])
    assert result.exit_code == 2
    assert "no lane has committed runs of both 'reference' and 'nobody'" in result.output

    # Runs and runtimes both named: that is what is wrong, whatever lanes the runtime ran.
    result = runner.invoke(app, ["compare", "--run", "run-g", "--runtime", "nobody"])
    assert result.exit_code == 2
    assert "give two --runtime or two --run, not both" in result.output
