"""The Dagster UI tells the story, one series at a time (a real webserver, a real browser): each
series reads its own check status and history, a metric's trend is one plot per series, ad-hoc
runs stay out of the launchpad, and a failing check shows its metric, value, threshold and the
table of its failing cases with their reasons."""

from __future__ import annotations

import json
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
from eval_pipeline_tests.lane_requests import lane_request
from eval_pipeline_tests.paths import PROJECT_ROOT

from .chromium import browser_page, needs_chromium

pytestmark = [pytest.mark.slow, needs_chromium]


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


LANE = "deterministic_fluency"
METRICS = ["deterministic_fluency", "metrics"]
NIGHTS = ("2026-11-28", "2026-11-29")
GLOSSED, BARE = "public|reference", "public|reference-no-gloss"


def _nightly_runs() -> None:
    """Two nights of the lane's nightly split against both declared targets: `reference` passes,
    `reference-no-gloss` fails its dotted-inventory and provenance checks (WARN)."""
    instance = ensure_instance()
    for night in NIGHTS:
        for target in ("reference", "reference-no-gloss"):
            outcome = materialize_lane(
                find_lane(LANE), find_target(target), lane_request("public", night), instance=instance
            )
            assert outcome.failure is None and outcome.success


def _failing_ad_hoc_run(tmp_path: Path) -> str:
    """A `--cases` run of two glossless cases: ad hoc, and failing."""
    cases = tmp_path / "mine.jsonl"
    lines = (PROJECT_ROOT / "evals" / LANE / "public" / "v1" / "cases.jsonl").read_text().splitlines()
    cases.write_text("\n".join(lines[:2]) + "\n", encoding="utf-8")
    outcome = materialize_lane(
        find_lane(LANE),
        find_target("reference-no-gloss"),
        lane_request("public", NIGHTS[-1], cases_path=str(cases)),
        instance=ensure_instance(),
    )
    assert outcome.failure is None and any(not c.passed for c in outcome.checks)
    return outcome.case_set


def _graphql(url: str, query: str) -> Any:
    request = urllib.request.Request(
        f"{url}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as reply:
        answer = json.load(reply)
    assert "errors" not in answer, answer
    return answer["data"]


def _executions(url: str, check: str, partition: str) -> list[str]:
    """What a check's execution history shows for one series: each evaluation's status."""
    data = _graphql(
        url,
        f"""{{ assetCheckExecutions(assetKey: {{path: {json.dumps(METRICS)}}}, checkName: "{check}",
              partition: "{partition}", limit: 50) {{ status partition }} }}""",
    )
    rows = data["assetCheckExecutions"]
    assert {row["partition"] for row in rows} <= {partition}
    return [row["status"] for row in rows]


def test_each_series_reads_its_own_checks_and_ad_hoc_runs_stay_out_of_the_launchpad(
    webserver: str, tmp_path: Path
) -> None:
    _nightly_runs()
    ad_hoc_case_set = _failing_ad_hoc_run(tmp_path)
    node = _graphql(
        webserver,
        f"""{{ assetNodes(assetKeys: [{{path: {json.dumps(METRICS)}}}]) {{
              partitionKeysByDimension {{ name partitionKeys }}
              assetChecksOrError {{ ... on AssetChecks {{ checks {{ name partitionStatuses {{
                ... on AssetCheckMultiPartitionStatuses {{ ranges {{ primaryDimStartKey secondaryDim {{
                  ... on AssetCheckDefaultPartitionStatuses {{ succeededPartitions failedPartitions }}
              }} }} }} }} }} }} }} }} }}""",
    )["assetNodes"][0]
    # The launchpad offers the declared series only: the ad-hoc case set was never registered.
    keys = {d["name"]: d["partitionKeys"] for d in node["partitionKeysByDimension"]}
    assert keys == {"case_set": ["public"], "runtime": ["reference", "reference-no-gloss"]}
    assert ad_hoc_case_set not in keys["case_set"]
    checks = node["assetChecksOrError"]["checks"]
    assert len(checks) == len(find_lane(LANE).effective_thresholds) + 1  # + measurement
    for check in checks:
        (statuses,) = [r["secondaryDim"] for r in check["partitionStatuses"]["ranges"]]
        # public|reference passes every check, whatever the other series did after it.
        assert "reference" in statuses["succeededPartitions"], check["name"]
        history = _executions(webserver, check["name"], GLOSSED)
        assert history == ["SUCCEEDED"] * len(NIGHTS), (check["name"], history)
    # ... while the glossless series reads its own failures, night after night.
    assert _executions(webserver, "no_dotted_inventory_rate", BARE) == ["FAILED"] * len(NIGHTS)
    # Every run the Runs page lists is a lane run of a declared series: no observation runs.
    runs = ensure_instance().get_runs()
    assert len(runs) == 2 * len(NIGHTS)
    assert {r.job_name for r in runs} == {f"{LANE}_job"}
    assert {r.tags["eval_pipeline/verdict"] for r in runs} == {"pass", "warn"}

    shots = Path(os.environ.get("EVAL_PIPELINE_SCREENSHOTS", tmp_path))
    with browser_page() as page:
        ui: Any = page
        ui.goto(f"{webserver}/assets/{LANE}/metrics?view=overview")
        ui.get_by_role("button", name="Plots").click()
        ui.get_by_text("Events", exact=True).last.click()  # the plots over time, not by partition
        ui.get_by_text(f"no_dotted_inventory_rate · {GLOSSED}", exact=True).first.wait_for(timeout=60_000)
        ui.get_by_text(f"no_dotted_inventory_rate · {BARE}", exact=True).first.wait_for(timeout=30_000)
        assert "no_dotted_inventory_rate\n" not in ui.inner_text("body")  # no plot mixing the series
        ui.screenshot(path=str(shots / "dagster-metric-trend-per-series.png"), full_page=True)


def test_a_failed_check_reads_as_a_failed_check_with_its_cases(webserver: str, tmp_path: Path) -> None:
    _nightly_runs()
    shots = Path(os.environ.get("EVAL_PIPELINE_SCREENSHOTS", tmp_path))
    with browser_page() as page:
        ui: Any = page
        ui.goto(f"{webserver}/assets/{LANE}/metrics?view=checks&checkDetail=no_dotted_inventory_rate")
        # The latest evaluation (of the glossless series): metric, value, threshold, severity and
        # the failing cases in the description, no click needed.
        ui.get_by_text(
            "no_dotted_inventory_rate = 0.3333, needs >= 0.85 (WARN).", exact=False
        ).first.wait_for(timeout=60_000)
        body = ui.inner_text("body")
        assert "10 failing case(s): fluency_belief_004" in body
        assert "Failed" in body and "Traceback" not in body and "DagsterAssetCheckFailedError" not in body
        assert "join the community" not in body.lower()  # nux is off in dagster.yaml
        ui.screenshot(path=str(shots / "dagster-failed-check.png"), full_page=True)
        # The markdown table of failing cases: case, predicate, code and the reason quoting the surface.
        ui.get_by_text("[Show Markdown]").first.click()
        dialog = ui.get_by_role("dialog")
        dialog.get_by_text("dotted_inventory").first.wait_for(timeout=30_000)
        table = dialog.inner_text()
        assert "fluency_belief_004" in table and "no_dotted_inventory" in table
        assert "meta.mental_state.belief" in table  # the reason quotes the surface
        ui.screenshot(path=str(shots / "dagster-failed-check-cases.png"), full_page=True)
        # The runs of the failing series succeeded: the model failed, the pipeline did not.
        ui.goto(f"{webserver}/runs")
        ui.get_by_text("eval_pipeline/verdict: warn", exact=False).first.wait_for(timeout=60_000)
        body = ui.inner_text("body")
        assert "Failure" not in body
        ui.screenshot(path=str(shots / "dagster-runs.png"), full_page=True)


def test_the_readme_tour_clicks_show_what_it_says(webserver: str, tmp_path: Path) -> None:
    """The README's Dagster UI steps, click by click, on the tour's two runs."""
    instance = ensure_instance()
    for target in ("reference", "reference-no-refusal"):
        materialize_lane(
            find_lane("refusal_calibration"),
            find_target(target),
            lane_request("public", NIGHTS[-1]),
            instance=instance,
        )
    shots = Path(os.environ.get("EVAL_PIPELINE_SCREENSHOTS", tmp_path))
    with browser_page() as page:
        ui: Any = page
        ui.goto(f"{webserver}/assets/refusal_calibration/metrics")  # step 1: the lane's metrics
        ui.get_by_role("tab", name="Checks").click()  # step 2
        ui.get_by_text("fabrication_rate", exact=True).first.click()
        ui.get_by_text("fabrication_rate = 1, needs == 0 (ERROR).", exact=False).first.wait_for(
            timeout=60_000
        )
        ui.get_by_text("[Show Markdown]").first.click()
        ui.get_by_role("dialog").get_by_text("refusal_oog_brenvalt_004").first.wait_for(timeout=30_000)
        ui.keyboard.press("Escape")
        ui.get_by_role("tab", name="Partitions").last.click()  # step 3: the check's own partitions
        # One series passed the check, the other failed it (a long name is shown cut in the middle).
        ui.get_by_text("Failed (1)").first.wait_for(timeout=30_000)
        ui.get_by_text("Passed (1)").first.wait_for(timeout=30_000)
        ui.screenshot(path=str(shots / "dagster-check-partitions.png"))
        ui.get_by_role("tab", name="Overview").first.click()  # step 4
        ui.get_by_role("button", name="Plots").click()
        ui.get_by_role("button", name="Events").click()
        ui.get_by_text("fabrication_rate · public|reference-no-refusal", exact=True).first.wait_for(
            timeout=60_000
        )
        ui.get_by_role("link", name="Runs").first.click()  # step 5
        ui.get_by_text("eval_pipeline/verdict: fail").first.wait_for(timeout=60_000)
        body = ui.inner_text("body")
        assert "partition: public|reference-no-refusal" in body and "eval_pipeline/date:" in body
        assert "Failure" not in body
