"""A lane run reads ``evals/runtimes.yaml`` once and builds its runtime once, however it starts.

Reads are counted at the interpreter (every ``open`` of the targets file, whoever opens it);
builds at the registry, around the real adapter factory, which still builds the real runtime.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.core.settings import targets_file
from eval_pipeline.dagster_wiring.code_location import build_definitions
from eval_pipeline.dagster_wiring.launch import ensure_instance
from eval_pipeline.dagster_wiring.partitions import partition_key, register_series
from eval_pipeline.dagster_wiring.schedules import job_name
from eval_pipeline.lanes.registry import find_lane
from eval_pipeline.runtimes.base import ChatRuntime
from eval_pipeline.runtimes.registry import RUNTIME_ADAPTERS

LANE = "deterministic_fluency"

_opened: list[str] | None = None  # the paths opened while a test counts, else None


def _count_opens(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and _opened is not None and isinstance(args[0], str | Path):
        _opened.append(str(args[0]))


sys.addaudithook(_count_opens)  # an audit hook cannot be removed: it counts only inside `counted`


class Counts:
    def __init__(self) -> None:
        self.builds = 0
        self.opened: list[str] = []

    @property
    def target_file_reads(self) -> int:
        return self.opened.count(str(targets_file()))


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counts]:
    """Counts for the block: opens of the targets file and builds of the reference runtime."""
    global _opened
    counts = Counts()
    build_reference = RUNTIME_ADAPTERS.get("reference")

    def counting(argument: str, options: Mapping[str, Any]) -> ChatRuntime:
        counts.builds += 1
        return build_reference(argument, options)

    factories: dict[str, Callable[[str, Mapping[str, Any]], ChatRuntime]] = RUNTIME_ADAPTERS._entries
    monkeypatch.setitem(factories, "reference", counting)
    _opened = counts.opened
    try:
        yield counts
    finally:
        _opened = None


def test_a_cli_lane_run_reads_the_targets_file_once_and_builds_once(counted: Counts) -> None:
    result = CliRunner().invoke(app, ["run", "--lane", LANE, "--runtime", "reference"])
    assert result.exit_code == 0, result.output
    assert "1 lane run(s)" in result.output
    assert (counted.target_file_reads, counted.builds) == (1, 1)


def test_every_lane_of_an_invocation_drives_the_one_runtime(counted: Counts) -> None:
    lanes = ["--lane", LANE, "--lane", "articulation_of_status"]
    result = CliRunner().invoke(app, ["run", *lanes, "--runtime", "reference"])
    assert result.exit_code == 0, result.output
    assert "2 lane run(s)" in result.output
    assert (counted.target_file_reads, counted.builds) == (1, 1)


def test_a_launchpad_run_resolves_its_target_once_and_builds_once(counted: Counts) -> None:
    """The UI path: the code location's runtime resource reads the file when the first step asks
    for the partition's target; every later step gets the same target."""
    spec = find_lane(LANE)
    instance = ensure_instance()
    register_series(instance, LANE, ["dev"], ["reference-no-gloss"])
    job = build_definitions([spec]).resolve_job_def(job_name(spec))
    counted.opened.clear()  # loading the definitions is not the run
    result = job.execute_in_process(
        instance=instance, partition_key=partition_key("dev", "reference-no-gloss")
    )
    assert result.success
    assert set(result.asset_value(dg.AssetKey([LANE, "metrics"]))["runtime"]) == {"reference-no-gloss"}
    assert (counted.target_file_reads, counted.builds) == (1, 1)
