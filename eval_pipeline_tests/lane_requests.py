"""A lane run's request as the tests write it: split and night, with the drive settings and run
options a test sets by name; history is the test's own (resolved as the command line does)."""

from __future__ import annotations

from typing import Any

from eval_pipeline.core.settings import history_root
from eval_pipeline.run.request import DriveSettings, LaneRunRequest


def lane_request(split: str, date: str, **settings: Any) -> LaneRunRequest:
    """``settings`` name :class:`DriveSettings` fields (``repeat=2``) or :class:`LaneRunRequest`
    fields (``cases_path=…``, ``executor="celery"``)."""
    drive = {name: settings.pop(name) for name in list(settings) if name in DriveSettings.model_fields}
    settings.setdefault("history_root", history_root())
    return LaneRunRequest(split=split, date=date, drive=DriveSettings(**drive), **settings)
