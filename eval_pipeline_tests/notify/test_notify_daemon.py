"""The ``notify_lane_runs`` sensor under a real ``dagster-daemon``: a failing nightly run on
the instance reaches the receiver, once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from eval_pipeline.dagster_wiring.launch import ensure_instance
from eval_pipeline_tests.dagster.processes import daemon
from eval_pipeline_tests.notify.conftest import Receiver
from eval_pipeline_tests.notify.test_notify_sensor import nightly_run
from eval_pipeline_tests.notify.test_run_notify import NOTIFY, staging

DAEMON_TIMEOUT_S = 240.0


@pytest.mark.slow
def test_the_daemon_ticks_the_sensor_and_the_receiver_gets_the_failing_nightly_once(
    receiver: Receiver, evals: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (evals / "notify.yaml").write_text(NOTIFY, encoding="utf-8")
    monkeypatch.setenv("TEAM_HOOK", receiver.url)
    staging(evals, "reference:no-refusal")
    instance = ensure_instance()
    failing = nightly_run(instance, "2026-11-27")
    log = tmp_path / "daemon.log"
    with daemon(log):
        deadline = time.monotonic() + DAEMON_TIMEOUT_S
        while not receiver.bodies:
            assert time.monotonic() < deadline, f"no message; daemon log: {log.read_text()[-3000:]}"
            time.sleep(1)
        time.sleep(5)  # anything else the tick would have sent has arrived by now
    (body,) = receiver.bodies
    assert (body["event"], body["run_id"], body["series"]) == (
        "check_failed",
        failing,
        "refusal_calibration/dev/staging/dev",
    )
