"""The progress observers: throttled updates still end on the final tally, and a recording's
turns, answered at once, are counted at once."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

from eval_pipeline.lanes.kind import Thread, TurnRequest
from eval_pipeline.run.drive import Sending, drive
from eval_pipeline.run.progress import RichProgress, progress_columns
from eval_pipeline.runtimes.faults import RetryPolicy
from eval_pipeline.runtimes.registry import build_runtime
from eval_pipeline.runtimes.serve import ServeConfig
from eval_pipeline_tests.runtimes.helpers import served_reference, write_recording


def test_a_throttled_bar_still_shows_every_turn_once_the_last_is_in() -> None:
    with Progress(console=Console(file=io.StringIO())) as progress:
        bar = RichProgress(progress, "lane", every_s=3600.0)  # no update is due before the last turn
        bar.start(1000)
        for number in range(1000):
            bar({"error": "boom" if number % 10 == 0 else None})
            if number == 998:
                assert progress.tasks[0].completed == 0, "updates within the interval are skipped"
        task = progress.tasks[0]
        assert task.completed == 1000
        assert task.fields["errors"] == 100


def test_a_bar_shows_its_description_as_written_brackets_and_all() -> None:
    shown = io.StringIO()
    with Progress(console=Console(file=shown, width=100)) as progress:
        bar = RichProgress(progress, "fluency [public] · [bold]ref")
        bar.start(1)
        bar({"error": None})
    assert "fluency [public] · [bold]ref" in shown.getvalue()


def test_a_recording_reports_its_turns_at_once_to_an_observer_and_row_by_row_to_a_callback(
    tmp_path: Path,
) -> None:
    threads = [
        Thread(case_id=f"c{i}", turns=(TurnRequest(turn_index=0, role="turn", prompt="p"),)) for i in range(3)
    ]
    recorded = write_recording(
        tmp_path / "turns.jsonl",
        [
            {"case_id": "c0", "surface": "a."},
            {"case_id": "c1", "error": "TimeoutError: late"},
            {"case_id": "c2", "surface": "b."},
        ],
    )
    runtime = build_runtime(f"replay:{recorded}")
    with Progress(console=Console(file=io.StringIO())) as progress:
        bar = RichProgress(progress, "lane", every_s=3600.0)
        drive(runtime, threads, on_turn=bar, on_start=bar.start)
        assert (progress.tasks[0].completed, progress.tasks[0].fields["errors"]) == (3, 1)
    rows: list[dict[str, Any]] = []
    transcripts = drive(runtime, threads, on_turn=rows.append)
    assert [row["case_id"] for row in rows] == ["c0", "c1", "c2"]
    assert transcripts["latency_ms"].isna().all() and transcripts["error"].notna().sum() == 1


def test_turns_retried_after_a_transient_fault_are_counted_on_the_bar() -> None:
    """A server failing half its requests: the turns that needed more than one attempt are
    counted, and the finished bar says how many (it used to say only `errors 0`)."""
    threads = [
        Thread(case_id=f"c{i}", turns=(TurnRequest(turn_index=0, role="turn", prompt="What is truth?"),))
        for i in range(12)
    ]
    shown = io.StringIO()
    with served_reference(ServeConfig(fault_rate=0.5, retry_after_s=0.0, seed=3)) as server:
        runtime = build_runtime(f"openai:{server.base_url}", {"model": "reference", "max_retries": 0})
        with Progress(*progress_columns(), console=Console(file=shown, width=120)) as progress:
            bar = RichProgress(progress, "lane", every_s=3600.0)
            transcripts = drive(
                runtime,
                threads,
                Sending(retry=RetryPolicy(max_retries=20, backoff_s=0.0, max_backoff_s=0.0)),
                on_turn=bar,
                on_start=bar.start,
            )
    retried = int((transcripts["attempts"] > 1).sum())
    assert retried > 0 and transcripts["error"].isna().all()
    assert bar.tally.retried == retried
    assert f"errors 0 retried {retried}" in shown.getvalue()
