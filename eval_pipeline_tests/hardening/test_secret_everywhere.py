"""A secret planted in a declared ``openai:`` target's URL (userinfo, a ``?code=`` query value)
is found in no place a run stores or shows: history's Parquet files, the Dagster instance
under ``DAGSTER_HOME`` (event log included), the terminal, the JUnit file, the webhook
payloads and the viewer's pages.

The target's server lists no model of the configured name, so the runtime-version lookup
fails and its message (the URL it asked) is shown as a warning and stored in the event log:
the place the URL used to leak from."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.dagster_wiring.code_location import build_definitions
from eval_pipeline.dagster_wiring.launch import ensure_instance
from eval_pipeline.dagster_wiring.runtime_targets import OBSERVE_JOB
from eval_pipeline.history import connect
from eval_pipeline.lanes import find_lane
from eval_pipeline_tests.history.viewer_server import get, serving
from eval_pipeline_tests.notify.conftest import Receiver, evals, receiver  # noqa: F401 (fixtures)
from eval_pipeline_tests.runtimes.helpers import served_reference

runner = CliRunner()
PASSWORD = "sk-planted-password-7f3a"
CODE = "planted-code-9c1e"
SECRETS = (PASSWORD, CODE)
LANE = "deterministic_fluency"


def _found_in(text: str) -> list[str]:
    return [secret for secret in SECRETS if secret in text]


@pytest.mark.slow
def test_a_planted_secret_is_nowhere_a_run_stores_or_shows(
    isolated_state: Path,
    evals: Path,  # noqa: F811 (the fixture imported above)
    receiver: Receiver,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TEAM_HOOK", receiver.url)
    (evals / "notify.yaml").write_text(
        "channels:\n  team: {format: json, url_env: TEAM_HOOK}\n"
        "routes:\n  - {channel: team, events: [check_failed, void, regression], lanes: all}\n",
        encoding="utf-8",
    )
    junit = tmp_path / "junit.xml"
    with served_reference() as server:
        host = server.base_url.split("://", 1)[1].split("/", 1)[0]
        # ``unlisted`` is not what the server lists at /models (the lookup fails, naming its URL),
        # but its completions answer whatever model is asked for (the run is judged).
        with (evals / "runtimes.yaml").open("a", encoding="utf-8") as targets:
            targets.write(
                f"  userinfo:\n    spec: openai:http://someone:{PASSWORD}@{host}/v1\n"
                "    options: {model: unlisted}\n"
                f"  query:\n    spec: openai:http://{host}/v1?code={CODE}\n"
                "    options: {model: unlisted}\n"
            )
        results = [
            runner.invoke(
                app, ["run", "--lane", LANE, "--split", "dev", "--runtime", "userinfo", "--junit", str(junit)]
            ),
            runner.invoke(app, ["run", "--lane", LANE, "--split", "dev", "--runtime", "query", "--notify"]),
            # --cache asks the runtime version first: the failed lookup is the run's error.
            runner.invoke(app, ["run", "--lane", LANE, "--split", "dev", "--runtime", "userinfo", "--cache"]),
        ]
        # The hourly observation of every registered target, on the runs' instance: its
        # warning (the failed lookups) is stored in the event log.
        observe = build_definitions([find_lane(LANE)]).resolve_job_def(OBSERVE_JOB)
        assert observe.execute_in_process(instance=ensure_instance()).success
    assert [result.exit_code for result in results[:2]] != [2, 2], [r.output for r in results]
    refused = results[2]
    assert refused.exit_code == 2 and f"http://***@{host}/v1/models" in refused.stderr, refused.stderr
    for result in results:
        assert _found_in(result.stdout + result.stderr) == [], result.output

    stored = [path for path in [*isolated_state.rglob("*"), junit] if path.is_file()]
    event_logs = [path for path in stored if path.suffix in (".db", ".sqlite")]
    warned = [path for path in event_logs if b"runtime version unknown, not observed" in path.read_bytes()]
    assert warned and all(f"***@{host}".encode() in path.read_bytes() for path in warned)
    assert any(path.suffix == ".parquet" for path in stored) and junit.is_file()
    leaked = [str(path) for path in stored if _found_in(path.read_bytes().decode("utf-8", "replace"))]
    assert leaked == []

    assert receiver.bodies, "the query target's run (every turn a fault) sends an event"
    assert _found_in(repr(receiver.bodies)) == []

    history = str(isolated_state / "history")
    cases = connect(history).sql("select run_id, min(case_id) from transcripts group by run_id").fetchall()
    assert len(cases) == 2
    with serving(history) as viewer:
        pages = ["/", f"/lanes/{LANE}", f"/lanes/{LANE}/grid?split=dev"]
        for run_id, case_id in cases:
            pages += [f"/runs/{run_id}", f"/runs/{run_id}/cases/{case_id}"]
        for page in pages:
            status, html = get(viewer + page)
            assert status == 200 and _found_in(html) == [], page
