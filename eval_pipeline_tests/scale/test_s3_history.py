"""History on object storage: every history command against S3 (moto's server on 127.0.0.1)
answers exactly what it answers on a local folder holding the same runs."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.dagster_wiring.launch import ensure_instance, materialize_lane
from eval_pipeline.history.store import is_stored
from eval_pipeline.lanes import find_lane
from eval_pipeline.run.pipeline import LaneRun
from eval_pipeline.runtimes.targets import find_target
from eval_pipeline_tests.history.conftest import (
    CANDIDATE_RUNS,
    LANE,
    REFERENCE_RUNS,
    StoredRun,
    lane_runs,
    record_run,
)
from eval_pipeline_tests.lane_requests import lane_request

from ..history.viewer_server import get, serving
from . import servers

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("s3")]  # one moto server for the module
__all__ = ["lane_runs"]  # the history tests' session fixture, used here too

BUCKET = "eval-history"
# One uncommitted run (killed before its manifest): invisible in both places.
UNCOMMITTED = StoredRun("run-killed", "candidate", "2024-03-04", False)


@pytest.fixture(scope="module")
def s3_env() -> Iterator[dict[str, str]]:
    with servers.s3() as env:
        boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], **_credentials(env)).create_bucket(
            Bucket=BUCKET
        )
        yield env


def _credentials(env: dict[str, str]) -> dict[str, str]:
    return {
        "aws_access_key_id": env["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": env["AWS_SECRET_ACCESS_KEY"],
        "region_name": env["AWS_DEFAULT_REGION"],
    }


def stored_roots(folder: Path, lane_runs: dict[bool, LaneRun]) -> tuple[str, str]:
    """The same runs in a local folder and under s3://… (named after ``folder``), with the
    S3 environment set."""
    local, remote = str(folder / "history"), f"s3://{BUCKET}/{folder.name}/history"
    for root in (local, remote):
        for stored in (*CANDIDATE_RUNS, *REFERENCE_RUNS):
            record_run(root, lane_runs[stored.glossed], stored)
        record_run(root, lane_runs[False], UNCOMMITTED, commit=False)
    return local, remote


@pytest.fixture(scope="module")
def shared_roots(
    s3_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory, lane_runs: dict[bool, LaneRun]
) -> tuple[str, str]:
    """:func:`stored_roots` once for the module's tests that only read them."""
    with pytest.MonkeyPatch.context() as env:
        for name, value in s3_env.items():
            env.setenv(name, value)
        return stored_roots(tmp_path_factory.mktemp("shared"), lane_runs)


@pytest.fixture
def roots(
    s3_env: dict[str, str], shared_roots: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> tuple[str, str]:
    """The same runs in a local folder and under s3://…, for a test that only reads them;
    credentials only in the environment."""
    for name, value in s3_env.items():
        monkeypatch.setenv(name, value)
    return shared_roots


@pytest.fixture
def own_roots(
    s3_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lane_runs: dict[bool, LaneRun]
) -> tuple[str, str]:
    """The same runs in a local folder and under s3://…, this test's own to change."""
    for name, value in s3_env.items():
        monkeypatch.setenv(name, value)
    return stored_roots(tmp_path, lane_runs)


def invoke(root: str, *args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--history", root], env={"COLUMNS": "250"})
    assert result.exit_code == 0, (args, root, result.output)
    return result.output


COMMANDS: tuple[tuple[str, ...], ...] = (
    ("history", "-f", "json"),
    ("history", "--metric", "no_provenance_only_rate", "--since", "2024-03-02", "-f", "csv"),
    (
        "history",
        "--sql",
        "select runtime, run_id, seq, warnings from runs order by runtime, seq",
        "-f",
        "json",
    ),
    ("history", "--sql", "select count(*) as n from transcripts", "-f", "json"),
    ("diff", "-f", "json"),
    ("diff", "run-c1", "run-c2", "-f", "json"),
    ("flaky", "--lane", LANE, "--last", "10", "-f", "json"),
    ("first-failure", "fluency_truth_001", "--predicate", "no_provenance_only", "-f", "json"),
    ("compare", "--lane", LANE, "--runtime", "candidate", "--runtime", "reference", "--json"),
)


def test_every_history_command_answers_the_same_on_s3(roots: tuple[str, str]) -> None:
    local, remote = roots
    for command in COMMANDS:
        assert invoke(remote, *command) == invoke(local, *command), command
    runs = json.loads(
        invoke(remote, "history", "--sql", "select run_id from runs order by run_id", "-f", "json")
    )
    assert [r["run_id"] for r in runs] == sorted(s.run_id for s in (*CANDIDATE_RUNS, *REFERENCE_RUNS))


def test_report_on_s3_is_the_local_report(roots: tuple[str, str], tmp_path: Path) -> None:
    local, remote = roots
    invoke(local, "report", "--out", str(tmp_path / "local-report"))
    invoke(remote, "report", "--out", str(tmp_path / "s3-report"))
    local_html = (tmp_path / "local-report" / "index.html").read_text(encoding="utf-8")
    s3_html = (tmp_path / "s3-report" / "index.html").read_text(encoding="utf-8")
    assert "run-c4" in s3_html

    def comparable(html: str, root: str) -> str:
        # the two reports may be generated on either side of a minute boundary
        return re.sub(r"Generated \S+ \S+ UTC", "Generated <time>", html.replace(root, "<root>"))

    assert comparable(s3_html, remote) == comparable(local_html, local)
    # Its run and case pages too, file for file.
    local_pages = sorted(
        p.relative_to(tmp_path / "local-report") for p in (tmp_path / "local-report").rglob("*.html")
    )
    s3_pages = sorted(p.relative_to(tmp_path / "s3-report") for p in (tmp_path / "s3-report").rglob("*.html"))
    assert s3_pages == local_pages and len(local_pages) > 10
    for page in local_pages:
        assert comparable((tmp_path / "s3-report" / page).read_text(encoding="utf-8"), remote) == comparable(
            (tmp_path / "local-report" / page).read_text(encoding="utf-8"), local
        ), page


def test_the_viewer_on_s3_shows_what_it_shows_on_a_folder(roots: tuple[str, str]) -> None:
    paths = (
        "/",
        f"/lanes/{LANE}",
        f"/lanes/{LANE}/grid?split=public&filter=disagree",
        "/runs/run-c4",
        "/runs/run-c4/cases/fluency_truth_001",
        "/compare?a=run-r2&b=run-c4",
        "/runs/run-killed",  # not committed: not there, on either side
    )
    answers = {}
    for root in roots:
        with serving(root) as url:
            answers[root] = [
                (status, re.sub(r"Generated \S+ \S+ UTC", "", html.replace(root, "<root>")))
                for status, html in (get(url + path) for path in paths)
            ]
    local, remote = roots
    assert answers[remote] == answers[local]
    assert [status for status, _ in answers[remote]] == [200] * 6 + [404]


def test_compaction_on_s3_keeps_every_answer(own_roots: tuple[str, str]) -> None:
    local, remote = own_roots
    before = [invoke(remote, *command) for command in COMMANDS]
    assert invoke(remote, "history", "compact", "--month", "2024-03") == invoke(
        local, "history", "compact", "--month", "2024-03"
    ).replace(local, remote)
    assert is_stored(remote, "metrics", LANE, "2024-03-01", "run-c1")  # now inside compacted.parquet
    assert [invoke(remote, *command) for command in COMMANDS] == before
    for command in COMMANDS:
        assert invoke(remote, *command) == invoke(local, *command), command


def test_a_lane_run_appends_to_s3_history(s3_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The Dagster side's append and commit, with the history root an s3:// URL."""
    for name, value in s3_env.items():
        monkeypatch.setenv(name, value)
    remote = f"s3://{BUCKET}/lane-run/history"
    outcomes = [
        materialize_lane(
            find_lane(LANE),
            find_target("reference"),
            lane_request("public", day, history_root=remote),
            instance=ensure_instance(),
        )
        for day in ("2026-11-29", "2026-11-30")
    ]
    assert all(o.success for o in outcomes), [o.failure for o in outcomes]
    assert {c.name: c.passed for c in outcomes[1].checks}["no_regression"]  # read the first run from S3
    runs = json.loads(
        invoke(remote, "history", "--sql", "select run_id, seq from runs order by seq", "-f", "json")
    )
    assert runs == [{"run_id": o.run_id, "seq": i} for i, o in enumerate(outcomes, start=1)]
