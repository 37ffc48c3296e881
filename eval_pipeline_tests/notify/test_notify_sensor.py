"""The ``notify_lane_runs`` sensor over a real instance: a lane run the daemon would have
launched (not the CLI's) is announced once; a second tick sends nothing new; the CLI's own
runs are left to ``run --notify``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.core.series import Series
from eval_pipeline.core.settings import targets_file
from eval_pipeline.dagster_wiring.code_location import build_definitions
from eval_pipeline.dagster_wiring.launch import ensure_instance, materialize_lane
from eval_pipeline.dagster_wiring.resources import HistoryResource
from eval_pipeline.dagster_wiring.sensors import CLI_SOURCE_TAG, NOTIFY_SENSOR_NAME, notify_sensor
from eval_pipeline.lanes.registry import discover_lanes
from eval_pipeline.notify.staleness import stale_series_events
from eval_pipeline.runtimes.targets import load_targets
from eval_pipeline_tests.lane_requests import lane_request
from eval_pipeline_tests.notify.conftest import Receiver
from eval_pipeline_tests.notify.test_run_notify import NOTIFY, staging


def tick(instance: dg.DagsterInstance, cursor: str | None) -> tuple[str, str | None]:
    specs = discover_lanes()
    context = dg.build_sensor_context(
        instance=instance, cursor=cursor, resources={"history": HistoryResource()}
    )
    result = notify_sensor(specs)(context)
    assert isinstance(result, dg.SkipReason)
    return str(result.skip_message), context.cursor


def nightly_run(instance: dg.DagsterInstance, night: str, **tags: str) -> str:
    spec = next(s for s in discover_lanes() if s.name == "refusal_calibration")
    target = load_targets(targets_file())["staging"]
    outcome = materialize_lane(
        spec, target, lane_request("dev", night, tags=tags, log_level="ERROR"), instance=instance
    )
    assert outcome.failure is None
    return outcome.run_id


def test_the_code_location_has_the_notify_sensor() -> None:
    sensors = {s.name for s in build_definitions().sensors or []}
    assert NOTIFY_SENSOR_NAME in sensors


@pytest.mark.slow
def test_the_sensor_announces_a_failing_nightly_once_and_a_recovery(
    receiver: Receiver, evals: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (evals / "notify.yaml").write_text(NOTIFY, encoding="utf-8")
    monkeypatch.setenv("TEAM_HOOK", receiver.url)
    monkeypatch.setenv("EVAL_PIPELINE_DAGSTER_URL", "http://dagster.test")
    staging(evals, "reference:no-refusal")
    instance = ensure_instance()

    message, cursor = tick(instance, None)
    assert receiver.bodies == [] and "0 lane run(s) read" in message

    failing = nightly_run(instance, "2026-11-27")
    nightly_run(instance, "2026-11-27", **{CLI_SOURCE_TAG: "cli"})  # the CLI's run: --notify's to send
    message, cursor = tick(instance, cursor)
    (body,) = receiver.bodies
    assert (body["event"], body["run_id"], body["night"]) == ("check_failed", failing, "2026-11-27")
    assert body["links"]["dagster_run"] == f"http://dagster.test/runs/{failing}"
    assert "1 lane run(s) read; 1 message(s) sent" in message

    message, cursor = tick(instance, cursor)  # a second tick: nothing new
    assert len(receiver.bodies) == 1 and "0 lane run(s) read; 0 message(s) sent" in message
    _, _ = tick(instance, None)  # even from no cursor, the ledger holds: one message per night
    assert len(receiver.bodies) == 1

    staging(evals, "reference")
    recovered = nightly_run(instance, "2026-11-28")
    message, cursor = tick(instance, cursor)
    assert [b["event"] for b in receiver.bodies] == ["check_failed", "recovered"]
    assert receiver.bodies[1]["run_id"] == recovered


def test_a_bad_notify_file_is_logged_and_nothing_is_sent(evals: Path) -> None:
    (evals / "notify.yaml").write_text("channels: {team: {format: slack}}\n", encoding="utf-8")
    message, cursor = tick(ensure_instance(), None)
    assert message.endswith("notify.yaml is not valid: 1 problem(s), nothing sent") and cursor is None


def test_a_nightly_series_whose_last_run_is_older_than_the_freshness_window_is_stale(evals: Path) -> None:
    staging(evals, "reference:no-refusal")
    instance = ensure_instance()
    run_id = nightly_run(instance, "2026-11-27")
    series = {Series("refusal_calibration", "dev", "staging", "dev")}
    window = timedelta(hours=26)
    root = HistoryResource().resolved_root()
    assert stale_series_events(root, series, now=datetime.now(UTC), window=window) == []
    later = datetime.now(UTC) + timedelta(hours=27)
    (event,) = stale_series_events(root, series, now=later, window=window)
    assert (event.kind, event.severity, event.run.run_id) == ("stale", "ERROR", run_id)
    assert event.run.night == later.date().isoformat()  # one message per night the series stays stale
    assert event.headline.startswith("refusal_calibration/dev [staging]: stale, its last run")
    assert event.headline.endswith("started 27 h ago (freshness 26 h)")
    assert (
        stale_series_events(
            root, {Series("refusal_calibration", "dev", "reference", "dev")}, now=later, window=window
        )
        == []
    )
