"""Every surface renders the one run outcome: on the quick start's main job and on
``reference-no-gloss``, ``--json``, JUnit, ``--summary-md``, the notification payload and the
viewer's run page say the same verdict and the same failing cases for every lane run."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import junitparser
import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline_tests.history.viewer_server import get, serving
from eval_pipeline_tests.notify.conftest import Receiver

pytestmark = pytest.mark.slow

NOTIFY = """\
channels:
  team: {format: json, url_env: TEAM_HOOK}
routes:
  - {channel: team, events: [check_failed, regression, void, recovered]}
"""


def _surfaces(tmp_path: Path, name: str, *args: str) -> tuple[dict[str, Any], Path, str]:
    junit, summary = tmp_path / f"{name}.xml", tmp_path / f"{name}.md"
    result = CliRunner().invoke(
        app, ["run", *args, "--json", "--notify", "--junit", str(junit), "--summary-md", str(summary)]
    )
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code in (0, 1), result.stdout + result.stderr
    return json.loads(result.stdout), junit, summary.read_text("utf-8")


def _failing_testcases(junit: Path) -> dict[str, set[str]]:
    """Each suite's (lane run's) failing test cases."""
    return {
        str(suite.name): {
            str(case.name) for case in suite if case.result and case.result[0]._tag == "failure"
        }
        for suite in junitparser.JUnitXml.fromfile(str(junit))
    }


@pytest.mark.parametrize("args", [(), ("--runtime", "reference-no-gloss")], ids=["main-job", "no-gloss"])
def test_json_junit_summary_notification_and_viewer_agree(
    args: tuple[str, ...],
    tmp_path: Path,
    history_root: Path,
    receiver: Receiver,
    evals: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (evals / "notify.yaml").write_text(NOTIFY, encoding="utf-8")
    monkeypatch.setenv("TEAM_HOOK", receiver.url)
    document, junit, summary = _surfaces(tmp_path, "run", *args)
    lanes = document["lanes"]
    assert len(lanes) >= 1
    failing_suites = _failing_testcases(junit)
    payloads = {body["series"]: body for body in receiver.bodies if body["event"] == "check_failed"}
    with serving(str(history_root)) as url:
        pages = {lane["run_id"]: get(f"{url}/runs/{lane['run_id']}") for lane in lanes}
    for lane in lanes:
        status, page = pages[lane["run_id"]]
        assert status == 200
        series = f"{lane['lane']}/{lane['split']}/{lane['runtime']}/{lane['case_set']}"
        label = next(name for name in failing_suites if name.startswith(f"{lane['lane']}/{lane['split']}"))
        verdict, items = lane["verdict"], lane["failing"]
        # JUnit: a failure per case with a hard failing item or counted by a failed blocking check.
        blocked = {case for c in lane["checks"] if c["verdict"] == "fail" for case in c["failing_case_ids"]}
        hard = {item["case_id"] for item in items if item["severity"] == "hard"}
        assert failing_suites[label] == hard | blocked, series
        # The CI summary: the lane run's verdict.
        assert re.search(
            rf"^### {re.escape(lane['lane'].replace('_', chr(92) + '_'))}.*: {verdict}$",
            summary,
            re.MULTILINE,
        ), series
        # The notification: sent when a threshold check failed, listing the first failing items.
        failed_checks = [c for c in lane["checks"] if c["threshold"] and c["verdict"] in ("fail", "warn")]
        if failed_checks:
            payload = payloads[series]
            assert {c["name"] for c in payload["checks"]} == {c["name"] for c in failed_checks}
            assert [c["case_id"] for c in payload["failing_cases"]] == [i["case_id"] for i in items[:5]]
            assert payload["failing_total"] == lane["failing_results"]
        else:
            assert series not in payloads
        # The viewer's run page: the same verdict and the same counts.
        assert re.search(rf'<h2>.*· <span class="[^"]*">{verdict}</span></h2>', page), series
        if lane["failing_results"]:
            assert (
                f"Failing cases ({lane['failing_cases']} case(s), {lane['failing_results']} result(s))"
                in page
            )
