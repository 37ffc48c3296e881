"""One lane evaluation, stage by stage, as plain functions (pipeline, cases_stage): the
driver that sends the turns (drive), the journal and ledger a run resumes from and spends
its budget through, the progress it reports and the worker processes it shares work with.

What other rooms use is exported here and loaded on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eval_pipeline.core.faces import lazy_exports

if TYPE_CHECKING:
    from eval_pipeline.run.cases_stage import write_cases
    from eval_pipeline.run.drive import Books, Sending, in_flight, recording_of, samples_to_drive
    from eval_pipeline.run.framework_stage import run_framework, runner_metadata
    from eval_pipeline.run.journal import JournalIdentity, remove_journals
    from eval_pipeline.run.ledger import Journaling, RunLedger, cases_sha256, transcripts_ledger
    from eval_pipeline.run.pipeline import (
        StageOutput,
        drive_cases,
        lane_threads,
        measure,
        metric_rows,
        score_cases,
        score_turns,
    )
    from eval_pipeline.run.progress import FanOut, LogProgress, NoProgress, ProgressObserver, rich_progress
    from eval_pipeline.run.request import DriveSettings, LaneRunRequest, RunRequest
    from eval_pipeline.run.workers import worker_count

_EXPORTS: dict[str, str] = {
    "Books": "drive",
    "DriveSettings": "request",
    "FanOut": "progress",
    "JournalIdentity": "journal",
    "Journaling": "ledger",
    "LaneRunRequest": "request",
    "LogProgress": "progress",
    "NoProgress": "progress",
    "ProgressObserver": "progress",
    "RunLedger": "ledger",
    "RunRequest": "request",
    "Sending": "drive",
    "StageOutput": "pipeline",
    "cases_sha256": "ledger",
    "drive_cases": "pipeline",
    "in_flight": "drive",
    "lane_threads": "pipeline",
    "measure": "pipeline",
    "metric_rows": "pipeline",
    "recording_of": "drive",
    "remove_journals": "journal",
    "run_framework": "framework_stage",
    "runner_metadata": "framework_stage",
    "rich_progress": "progress",
    "samples_to_drive": "drive",
    "score_cases": "pipeline",
    "score_turns": "pipeline",
    "transcripts_ledger": "ledger",
    "worker_count": "workers",
    "write_cases": "cases_stage",
}
__all__ = [
    "Books",
    "DriveSettings",
    "FanOut",
    "JournalIdentity",
    "Journaling",
    "LaneRunRequest",
    "LogProgress",
    "NoProgress",
    "ProgressObserver",
    "RunLedger",
    "RunRequest",
    "Sending",
    "StageOutput",
    "cases_sha256",
    "drive_cases",
    "in_flight",
    "lane_threads",
    "measure",
    "metric_rows",
    "recording_of",
    "remove_journals",
    "rich_progress",
    "run_framework",
    "runner_metadata",
    "samples_to_drive",
    "score_cases",
    "score_turns",
    "transcripts_ledger",
    "worker_count",
    "write_cases",
]

__getattr__ = lazy_exports(__name__, _EXPORTS)
