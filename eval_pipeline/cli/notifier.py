"""What ``run --notify`` sends with, and the sample event ``notify test`` sends: lane runs'
events for the channels of ``evals/notify.yaml``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from eval_pipeline.cli.common import print_plain
from eval_pipeline.core import Series
from eval_pipeline.notify import (
    Event,
    FailingCase,
    LaneRun,
    NotifyConfig,
    configured,
    instance_ledger,
    notify_file,
    notify_lane_runs,
)
from eval_pipeline.notify.outcomes import lane_run

if TYPE_CHECKING:
    import dagster as dg

    from eval_pipeline.dagster_wiring.outcomes import LaneOutcome


@dataclass(frozen=True)
class RunNotifier:
    """``run --notify``: the notify file, read (and bad input reported) before anything runs."""

    config: NotifyConfig

    def send(
        self, outcomes: Sequence[LaneOutcome], *, night: str, instance: dg.DagsterInstance, history_root: str
    ) -> None:
        """Each lane run's events, once per series, event and night; a failed delivery is a
        warning on stderr, never a change to the run's result."""
        runs = [lane_run(o, night) for o in outcomes if o.failure is None]
        done = notify_lane_runs(
            runs, self.config, instance_ledger(instance.storage_directory()), history_root=history_root
        )
        for warning in done.warnings:
            print_plain(f"warning: notification {warning}")
        if done.sent or done.duplicates:
            note = f"; {done.duplicates} already sent tonight" if done.duplicates else ""
            print_plain(f"notifications: {len(done.sent)} sent{note}")


def run_notifier(notify: bool) -> RunNotifier | None:
    """The notifier ``run --notify`` sends with (None without the flag); a missing or bad notify
    file is bad input (raised: the caller reports it and nothing runs)."""
    if not notify:
        return None
    config = configured()
    if config is None:
        raise FileNotFoundError(
            f"--notify: no {notify_file()} (channels and routes; see docs/notifications.md)"
        )
    return RunNotifier(config)


def sample_event() -> Event:
    """A made-up failing run: what a channel's messages look like."""
    from eval_pipeline.outcome.run_outcome import CheckOutcome

    run = LaneRun(
        series=Series("deterministic_fluency", "public", "reference", "public"),
        run_id="0" * 32,
        night="2026-12-01",
        checks=(
            CheckOutcome(
                "no_dotted_inventory_rate",
                passed=False,
                severity="ERROR",
                value=0.3333,
                threshold=">= 0.85",
                verdict="fail",
            ),
        ),
        failing_cases=(
            FailingCase("fluency_sample_001", "no_dotted_inventory", "found a dotted inventory: 'a.b.c'"),
        ),
        failing_total=1,
    )
    return Event("check_failed", "ERROR", run, run.checks, "sample message from eval-pipeline notify test")
