"""What a framework lane gets for free, through the real parts: the nightly schedule runs the
checkout's current commit on a real Dagster instance, a runner that crashes is announced (its
traceback's last lines in the message) by ``run --notify`` and by the sensor to a webhook on
127.0.0.1, and two runs of one commit are history that ``flaky`` reads."""

from __future__ import annotations

import html
import json
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest
import yaml
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.cli.common import EXIT_VOID
from eval_pipeline.dagster_wiring.code_location import build_definitions
from eval_pipeline.dagster_wiring.launch import ensure_instance
from eval_pipeline.dagster_wiring.resources import HistoryResource
from eval_pipeline.dagster_wiring.schedules import job_name
from eval_pipeline.dagster_wiring.sensors import notify_sensor
from eval_pipeline.lanes import discover_lanes
from eval_pipeline_tests.frameworks.test_framework_lanes import import_lanes, run, write_failing_lane
from eval_pipeline_tests.history.viewer_server import get, serving
from eval_pipeline_tests.notify.conftest import Receiver

pytestmark = pytest.mark.slow

CRASH = "RuntimeError: the engine lost its pack after 2 cases"
NOTIFY = """\
channels:
  team: {format: json, url_env: TEAM_HOOK}
  chat: {format: slack, url_env: TEAM_HOOK}
routes:
  - {channel: team, events: [void], lanes: [fix_crashing]}
  - {channel: chat, events: [void], lanes: [fix_crashing]}
"""


def git(checkout: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def committed(checkout: Path, message: str) -> str:
    """The checkout with everything in it committed: its commit."""
    if not (checkout / ".git").exists():
        git(checkout, "init", "-q")
    git(checkout, "add", "-A")
    git(checkout, "commit", "-q", "--allow-empty", "-m", message)
    return git(checkout, "rev-parse", "HEAD")


def assert_says_why(receiver: Receiver) -> None:
    """One JSON and one Slack message, both void, both quoting the runner's traceback."""
    (document,) = [b for b in receiver.bodies if "event" in b]
    assert document["event"] == "void" and document["lane"] == "fix_crashing"
    (fault,) = document["faults"]
    assert fault.startswith("2 turn(s): ") and CRASH in fault and "_explode" in fault
    (slack,) = [b for b in receiver.bodies if "blocks" in b]
    said = "\n".join(block["text"]["text"] for block in slack["blocks"] if block["type"] == "section")
    assert CRASH in said and "_explode" in said


def test_run_notify_announces_a_crashed_runner_with_its_tracebacks_last_lines(
    project: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_failing_lane(project, "crashing", 60)
    (project / "evals" / "notify.yaml").write_text(NOTIFY, encoding="utf-8")
    monkeypatch.setenv("TEAM_HOOK", receiver.url)
    code, document = run("--lane", "fix_crashing", "--notify")
    assert code == EXIT_VOID and document["lanes"][0]["void"]
    assert_says_why(receiver)


def nightly(defs: dg.Definitions, instance: dg.DagsterInstance, lane: str, night: int) -> list[str]:
    """Tick the lane's nightly schedule for the night of November ``night`` and run what it
    requests, as the daemon would: the partitions it ran."""
    schedule = next(s for s in defs.schedules or [] if s.name == f"{lane}_nightly")
    with dg.build_schedule_context(
        instance=instance,
        scheduled_execution_time=datetime(2026, 11, night, 2, tzinfo=UTC),
        repository_def=defs.get_repository_def(),
    ) as context:
        requests = list(schedule.evaluate_tick(context).run_requests or [])
    job = defs.resolve_job_def(job_name(next(s for s in discover_lanes() if s.name == lane)))
    for request in requests:
        job.execute_in_process(
            instance=instance, partition_key=request.partition_key, tags=request.tags, raise_on_error=False
        )
    return [str(r.partition_key) for r in requests]


def history_runs(lane: str) -> list[dict]:
    result = CliRunner().invoke(app, ["history", "--lane", lane, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_nightly_runs_the_checkouts_current_commit_and_the_sensor_announces_a_crash(
    project: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import_lanes()
    write_failing_lane(project, "crashing", 60)
    (project / "evals" / "notify.yaml").write_text(NOTIFY, encoding="utf-8")
    monkeypatch.setenv("TEAM_HOOK", receiver.url)
    checkout = tmp_path / "checkout"
    first = committed(checkout, "first")
    defs = build_definitions()
    instance = ensure_instance()

    assert nightly(defs, instance, "fix_greeting_chat", 27) == [f"public_v1|fix-{first[:12]}"]
    assert nightly(defs, instance, "fix_crashing", 27) == [f"dev|fix-{first[:12]}"]
    (checkout / "evals/greeting_chat/NOTES").write_text("a later commit\n", encoding="utf-8")
    second = committed(checkout, "second")
    assert nightly(defs, instance, "fix_greeting_chat", 28) == [f"public_v1|fix-{second[:12]}"]

    runs = history_runs("fix_greeting_chat")
    assert sorted((r["date"][:10], r["runtime"]) for r in runs) == [
        ("2026-11-27", f"fix-{first[:12]}"),
        ("2026-11-28", f"fix-{second[:12]}"),
    ]
    context = dg.build_sensor_context(instance=instance, resources={"history": HistoryResource()})
    notify_sensor(discover_lanes())(context)
    assert_says_why(receiver)


def failing_rows(page: str) -> list[tuple[str, ...]]:
    """The run page's failing case rows: (case, predicate, severity, reason)."""
    return re.findall(
        r'<tr><td class="\w+"><a href="[^"]+">([^<]+)</a></td><td></td><td>([^<]+)</td><td>(\w+)</td>'
        r'<td><code>\w+</code></td><td class="reason">([^<]*)</td>',
        page,
    )


def turns(page: str) -> list[tuple[str, ...]]:
    """The case page's transcript: (turn, role, prompt, surface) of each turn."""
    return [
        tuple(html.unescape(part) for part in found)
        for found in re.findall(
            r'<div class="meta">turn (\d+) · (\w+) ·[^<]*</div>\s*'
            r'<div class="prompt"><strong>prompt</strong> ([^<]*)</div>\s*<div class="surface">([^<]*)</div>',
            page,
        )
    ]


def verdicts(page: str) -> list[tuple[str, ...]]:
    """The case page's case rows: (predicate, verdict, severity, reason)."""
    return re.findall(
        r'<tr><td>([\w.]+)</td><td class="[\w/-]+">([^<]+)</td><td>(\w+)</td><td><code>\w+</code></td>'
        r'<td class="reason">([^<]*)</td>',
        page,
    )


def test_the_viewer_shows_a_framework_runs_case_rows_and_per_turn_transcripts(
    project: Path, history_root: Path
) -> None:
    import_lanes()
    chat = yaml.safe_load((project / "evals/fix_greeting_chat/lane.yaml").read_text(encoding="utf-8"))
    chat["runner"].update(case_rows={"hard": ["greeted"], "report": ["polite"]}, turns={"field": "turns"})
    chat["runner"]["metrics"] = {"greet_rate": {"rate_of": "greeted"}}
    (project / "evals/fix_greeting_chat/lane.yaml").write_text(yaml.safe_dump(chat), encoding="utf-8")
    _, document = run("--lane", "fix_greeting_chat", "--split", "dev")
    run_id = document["lanes"][0]["run_id"]
    with serving(str(history_root)) as url:
        status, page = get(f"{url}/runs/{run_id}")
        pages = {case: get(f"{url}/runs/{run_id}/cases/{case}") for case in ("g2", "g3")}
    assert status == 200 and {status for status, _ in pages.values()} == {200}
    # the failing case rows: each a field of g2's detail, with the detail's own reason
    assert failing_rows(page) == [
        ("g2", "greeted", "hard", "greeted failed: a reply did not greet"),
        ("g2", "polite", "report", "polite failed: a reply did not greet"),
    ]
    g2, g3 = pages["g2"][1], pages["g3"][1]
    assert turns(g2) == [
        (
            "0",
            "case",
            '{"id": "g2", "kind": "warm", "prompts": ["Cy", "!no"]}',
            "greeted=false, polite=false — a reply did not greet",
        ),
        ("1", "turn", "Cy", "hello, Cy"),
        ("2", "turn", "!no", "no"),
    ]
    assert verdicts(g2) == [
        ("greeted", "fail", "hard", "greeted failed: a reply did not greet"),
        ("polite", "warn", "report", "polite failed: a reply did not greet"),
    ]
    # a passing case: its rows pass or do not apply (a terse case is not judged for politeness)
    assert turns(g3)[1:] == [("1", "turn", "Di", "hello, Di")]
    assert verdicts(g3) == [
        ("greeted", "pass", "hard", "greeted holds"),
        ("polite", "n/a", "report", "polite does not apply to this case"),
    ]


def test_runs_of_one_commit_are_one_series_in_history_and_flaky_finds_the_case_that_flipped(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import_lanes()
    chat = yaml.safe_load((project / "evals/fix_greeting_chat/lane.yaml").read_text(encoding="utf-8"))
    chat["runner"]["metrics"] = {"greet_rate": {"rate_of": "greeted"}}
    (project / "evals/fix_greeting_chat/lane.yaml").write_text(yaml.safe_dump(chat), encoding="utf-8")
    commit = committed(tmp_path / "checkout", "one commit")
    for night, gruff in (("2026-11-27", ""), ("2026-11-28", "g1"), ("2026-11-29", "")):
        monkeypatch.setenv("FIXTURE_GRUFF", gruff)  # g1's replies do not greet on the second night
        run("--lane", "fix_greeting_chat", "--split", "dev", "--date", night)
    runs = history_runs("fix_greeting_chat")
    assert {r["runtime"] for r in runs} == {f"fix-{commit[:12]}"} and len(runs) == 3
    result = CliRunner().invoke(app, ["flaky", "--lane", "fix_greeting_chat", "--format", "json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    flipped = {(c["case_id"], c["predicate"], c["verdicts"], c["flips"]) for c in found["cases"]}
    assert flipped == {("g1", "greeted", 3, 2), ("g1", "polite", 3, 2)}  # g2 fails every night: steady
    (rate,) = [r for r in found["rates"] if r["metric"] == "greet_rate"]
    assert (rate["runs"], rate["value"], rate["previous_value"]) == (3, 0.75, 0.5)
    assert rate["runtime"] == f"fix-{commit[:12]}"
