"""A run killed after its commit but before its journal was removed: ``--resume`` must not
commit it a second time. History never holds two runs answered from one journal."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from eval_pipeline.cli import app
from eval_pipeline.runtimes.serve import ReferenceServer, ServeConfig
from eval_pipeline_tests.resume.helpers import (
    LANE,
    TURNS_PER_THREAD,
    committed_runs,
    journals,
    kill_when,
    openai_arguments,
    requests_served,
    run_cli,
    write_threads,
)
from eval_pipeline_tests.runtimes.helpers import served_reference

THREADS = 20
CONCURRENCY = 4


@pytest.fixture
def server() -> Iterator[ReferenceServer]:
    with served_reference() as served:
        yield served


def arguments(server: ReferenceServer, cases: Path) -> list[str]:
    return [
        *openai_arguments(server),
        "--lane",
        LANE,
        "--cases",
        str(cases),
        "--concurrency",
        str(CONCURRENCY),
    ]


def run(server: ReferenceServer, cases: Path, *extra: str) -> Result:
    return CliRunner().invoke(app, ["run", *arguments(server, cases), *extra])


def test_resume_refuses_the_journal_of_a_committed_run(
    server: ReferenceServer, tmp_path: Path, isolated_state: Path, history_root: Path
) -> None:
    cases = write_threads(tmp_path / "threads.jsonl", THREADS)
    assert run(server, cases, "--max-turns", "50").exit_code == 4  # void: its journal is kept
    (interrupted,) = journals(isolated_state)
    kept = interrupted.read_bytes()
    finished = run(server, cases, "--resume")
    assert finished.exit_code == 0, finished.output
    (committed,) = committed_runs(history_root)
    assert journals(isolated_state) == []
    # The kill window: the run's manifest is written, its journal not yet removed.
    leftover = interrupted.with_name(f"{committed}.journal")
    leftover.write_bytes(kept)
    sent = requests_served(server)

    again = run(server, cases, "--resume")

    said = " ".join(again.output.split())
    assert again.exit_code == 2, again.output
    assert f"its run {committed} is already committed to history" in said and "without --resume" in said
    assert "Traceback" not in again.output
    assert requests_served(server) == sent
    assert committed_runs(history_root) == [committed]
    assert journals(isolated_state) == []  # removed, as the commit would have
    assert run(server, cases, "--resume").exit_code == 0  # nothing left: a new run, sent afresh
    assert requests_served(server) == sent + THREADS * TURNS_PER_THREAD


@pytest.mark.slow
def test_a_run_killed_as_it_commits_is_never_committed_twice(
    tmp_path: Path, isolated_state: Path, history_root: Path
) -> None:
    cases = write_threads(tmp_path / "threads.jsonl", THREADS)
    with served_reference(ServeConfig(latency_ms=5)) as server:
        common = arguments(server, cases)
        manifests = history_root / "run_manifests"
        kill_when(common, lambda: any(manifests.rglob("*.parquet")))
        (committed,) = committed_runs(history_root)
        left = journals(isolated_state)
        sent = requests_served(server)
        started = time.monotonic()
        resumed = run_cli([*common, "--resume"])
        assert time.monotonic() - started < 300
        if left:  # killed before the journal was removed: refused, nothing sent or committed
            assert resumed.returncode == 2, resumed.stderr[-3000:]
            assert "already committed to history" in " ".join(resumed.stderr.split())
            assert requests_served(server) == sent
            assert committed_runs(history_root) == [committed]
        else:  # killed after: nothing to resume, so a new run, every turn sent again
            assert resumed.returncode == 0, resumed.stderr[-3000:]
            assert requests_served(server) - sent == THREADS * TURNS_PER_THREAD
        assert journals(isolated_state) == []
