"""The uninterrupted run both killed-and-resumed runs are compared with, made once per worker."""

from __future__ import annotations

import pytest

from eval_pipeline.run.pipeline import LaneRun
from eval_pipeline_tests.resume.helpers import (
    KILLED_CONCURRENCY,
    KILLED_THREADS,
    TURNS_PER_THREAD,
    requests_served,
    uninterrupted_run,
    write_threads,
)
from eval_pipeline_tests.runtimes.helpers import served_reference


@pytest.fixture(scope="session")
def uninterrupted_threads(tmp_path_factory: pytest.TempPathFactory) -> LaneRun:
    """The lane over :data:`KILLED_THREADS` ten-turn threads against a served reference, in one
    uninterrupted piece (no Dagster, no history, its own state folder): what the tables of a run
    killed and resumed over the same threads must equal. The served reference answers alike at
    any latency, so this run does without the latency the killed runs need."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    cases = write_threads(folder / "threads.jsonl", KILLED_THREADS)
    with pytest.MonkeyPatch.context() as env, served_reference() as server:
        env.setenv("EVAL_PIPELINE_STATE", str(folder / "state"))
        env.setenv("EVAL_PIPELINE_HISTORY", str(folder / "state" / "history"))
        env.setenv("DAGSTER_HOME", str(folder / "state" / "dagster_home"))
        run = uninterrupted_run(server, None, cases, KILLED_CONCURRENCY)
        assert requests_served(server) == KILLED_THREADS * TURNS_PER_THREAD
    return run
