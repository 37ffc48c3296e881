"""The README's two-command quick start: its shape, CI's use of it, and the main job it runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from eval_pipeline.history import table_glob
from eval_pipeline.lanes import discover_lanes
from eval_pipeline_tests.paths import PROJECT_ROOT


def quick_start() -> list[str]:
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1]
    block = re.search(r"```[a-z]*\n(.*?)```", section, re.DOTALL)
    assert block is not None, "the quick start has no fenced code block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_quick_start_is_two_commands_and_ci_runs_the_second() -> None:
    setup_and_run, setup_and_test = quick_start()
    assert setup_and_run.endswith(".venv/bin/eval-pipeline run")
    assert setup_and_test.endswith(".venv/bin/pytest -n 2")
    assert setup_and_test in (PROJECT_ROOT / ".ci" / "run").read_text(encoding="utf-8")


@pytest.mark.slow
def test_main_job_runs_every_lane_the_way_the_quick_start_does(isolated_state: Path) -> None:
    command = quick_start()[0].rsplit("&&", 1)[1].split()  # ".venv/bin/eval-pipeline run"
    executable = Path(sys.executable).parent / Path(command[0]).name
    result = subprocess.run(
        [str(executable), *command[1:]],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "160"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Warning" not in result.stderr  # a clean run prints no library warnings
    lanes = discover_lanes()
    for spec in lanes:
        assert spec.name in result.stdout
    expected_runs = sum(len(spec.nightly_splits) for spec in lanes)
    assert f"{expected_runs} lane run(s); 0 blocking check failure(s)" in result.stdout
    (runs,) = duckdb.sql(
        f"select count(distinct run_id), count(distinct lane) from "
        f"read_parquet('{table_glob(str(isolated_state / 'history'), 'metrics')}', hive_partitioning = true)"
    ).fetchall()
    assert runs == (expected_runs, len(lanes))
