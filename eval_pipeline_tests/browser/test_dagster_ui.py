"""The Dagster UI tells the story: after a failing run, a lane's metrics asset shows the failing
check, its failing case ids and the table of their reasons (a real webserver, a real browser)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.dagster_wiring.launch import ensure_instance, materialize_lane
from eval_pipeline.lanes import find_lane
from eval_pipeline.runtimes.targets import find_target
from eval_pipeline.settings import PROJECT_ROOT
from eval_pipeline_tests.runtimes.helpers import write_recording

from .chromium import browser_page, needs_chromium

pytestmark = [pytest.mark.slow, needs_chromium]

FAILING = {
    "fluency_dev_time_001": "no_placeholder_rate",
    "fluency_dev_oov_zorblat_002": "complete_punctuation_rate",
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def webserver(isolated_state: Path) -> Iterator[str]:
    port = _free_port()
    log = (isolated_state / "webserver.log").open("w")
    process = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "dagster-webserver"),
            "-w",
            "workspace.yaml",
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
        ],
        cwd=PROJECT_ROOT,
        env=os.environ.copy(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/server_info", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError((isolated_state / "webserver.log").read_text()[-3000:])
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def _failing_run(tmp_path: Path) -> str:
    recorded = write_recording(
        tmp_path / "turns.jsonl",
        [
            {"case_id": "fluency_dev_time_001", "surface": "Time is <pending>."},
            {"case_id": "fluency_dev_oov_zorblat_002", "surface": "I do not know that word yet"},
        ],
    )
    outcome = materialize_lane(
        find_lane("deterministic_fluency"),
        find_target(f"replay:{recorded}"),
        instance=ensure_instance(),
        split="dev",
        date="2026-11-30",
    )
    assert {c.name for c in outcome.blocking_failures} >= set(FAILING.values())
    return outcome.run_id


def test_the_metrics_asset_shows_the_failing_check_and_its_cases(
    webserver: str, tmp_path: Path, isolated_state: Path
) -> None:
    _failing_run(tmp_path)
    shots = Path(os.environ.get("EVAL_PIPELINE_SCREENSHOTS", tmp_path))
    with browser_page() as page:
        ui: Any = page
        ui.goto(f"{webserver}/assets/deterministic_fluency/metrics?view=checks")
        check = ui.get_by_text("no_placeholder_rate", exact=True).first
        check.wait_for(timeout=60_000)
        check.click()
        # The check's latest execution: failed, with its failing case in the description (no click needed).
        ui.get_by_text("1 failing case(s): fluency_dev_time_001.", exact=False).first.wait_for(timeout=30_000)
        body = ui.inner_text("body")
        assert "Failed" in body and "no_placeholder_rate" in body
        assert "join the community" not in body.lower()  # nux is off in dagster.yaml
        ui.screenshot(path=str(shots / "dagster-check.png"), full_page=True)
        # The markdown table of failing cases: case, predicate, code and the reason quoting the surface.
        ui.get_by_text("[Show Markdown]").first.click()
        dialog = ui.get_by_role("dialog")
        dialog.get_by_text("placeholder_present").first.wait_for(timeout=30_000)
        table = dialog.inner_text()
        assert "fluency_dev_time_001" in table and "no_placeholder" in table
        assert "Time is <pending>." in table
        ui.screenshot(path=str(shots / "dagster-check-cases.png"), full_page=True)
