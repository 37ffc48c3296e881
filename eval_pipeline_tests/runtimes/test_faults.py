"""Faults are data: retried when transient, recorded with error and attempts, never dropped; secrets stay out."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pandas as pd
import pytest

from eval_pipeline.lanes.kind import Thread, TurnRequest
from eval_pipeline.lanes.registry import find_lane
from eval_pipeline.run.drive import Sending, drive
from eval_pipeline.run.pipeline import evaluate_lane
from eval_pipeline.run.progress import LogProgress
from eval_pipeline.runtimes import RuntimeSpecError, build_runtime
from eval_pipeline.runtimes.adapters.openai_http import retry_after_s
from eval_pipeline.runtimes.adapters.python_object import check_target
from eval_pipeline.runtimes.options import parse_runtime_options
from eval_pipeline.runtimes.serve import ServeConfig
from eval_pipeline.tables.columns import METRICS, TRANSCRIPTS, nullable_types, to_arrow
from eval_pipeline_tests.runtimes.helpers import served_reference

EXEC_BOT = Path(__file__).with_name("exec_bot.py")
SECRET = "sk-planted-0123456789abcdef-secret"


def _threads(prompts_by_case: dict[str, list[str]]) -> list[Thread]:
    return [
        Thread(
            case_id=case_id,
            turns=tuple(TurnRequest(turn_index=i, role="turn", prompt=p) for i, p in enumerate(prompts)),
        )
        for case_id, prompts in prompts_by_case.items()
    ]


@pytest.mark.slow
def test_flaky_server_run_completes_recovers_records_and_leaks_no_secret(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("EVAL_TEST_KEY", SECRET)
    caplog.set_level(logging.DEBUG)
    spec = find_lane("conversational_thread_coherence")
    config = ServeConfig(
        fault_rate=0.2, stall_rate=0.1, stall_s=1.5, retry_after_s=0.05, seed=7, api_key=SECRET
    )
    with served_reference(config) as server:
        runtime = build_runtime(
            f"openai:{server.base_url}",
            {
                "model": "reference",
                "api_key_env": "EVAL_TEST_KEY",
                "timeout_s": 0.4,
                "max_retries": 1,
                "backoff_s": 0.01,
            },
        )
        progress = LogProgress(logging.getLogger("eval_pipeline.test_progress"), every_s=0.0, label="flaky")
        try:
            run = evaluate_lane(spec, "public", runtime, concurrency=8, progress=progress)
        finally:
            runtime.close()
        faults = dict(server.fault_counts)

    transcripts = run.transcripts
    expected_turns = sum(len(t.turns) for t in _lane_threads(spec))
    assert len(transcripts) == expected_turns  # nothing dropped
    assert faults["error_500"] and faults["rate_limited_429"] and faults["stall"]
    failed = transcripts[transcripts["error"].notna()]
    recovered = transcripts[transcripts["error"].isna() & (transcripts["attempts"] > 1)]
    assert len(recovered) > 0
    assert len(failed) > 0
    assert (failed["attempts"] == 2).all()  # max_retries=1: every failed turn was tried twice
    assert failed["error"].str.contains("HTTP 500|HTTP 429|timed out").all()
    error_rate = run.metrics.set_index("metric").loc["error_rate"]
    assert error_rate["numerator"] == len(failed)
    assert error_rate["value"] == pytest.approx(len(failed) / len(transcripts))
    failed_keys = set(zip(failed["case_id"], failed["turn_index"], strict=True))
    faulted_verdicts = run.turn_predicates[
        [
            k in failed_keys
            for k in zip(run.turn_predicates["case_id"], run.turn_predicates["turn_index"], strict=True)
        ]
    ]
    assert (faulted_verdicts["passed"].dropna() == False).all()  # noqa: E712 - nullable booleans

    # The planted key is in no table (with run columns), not in the runtime column, not in any log line.
    run_values = {
        "run_id": "r",
        "lane": spec.name,
        "split": "public",
        "runtime": runtime.spec,
        "case_set": "public",
    }
    stored = [
        to_arrow(TRANSCRIPTS, transcripts, **run_values).to_pandas(types_mapper=nullable_types),
        run.turn_predicates,
        run.case_predicates,
        to_arrow(METRICS, run.metrics, **run_values).to_pandas(types_mapper=nullable_types),
    ]
    assert SECRET not in runtime.spec
    for table in stored:
        assert SECRET not in table.to_csv()
    assert caplog.records, "progress and SDK debug logs were captured"
    assert any("flaky: turns" in r.getMessage() for r in caplog.records)
    assert all(SECRET not in r.getMessage() for r in caplog.records)


def _lane_threads(spec):  # type: ignore[no-untyped-def]
    from eval_pipeline.lanes import lane_kind
    from eval_pipeline.run.pipeline import load_split

    kind = lane_kind(spec)
    return kind.threads([c.case for c in load_split(spec, "public")], spec, "public")


@pytest.mark.slow
def test_wrong_key_is_a_recorded_non_transient_fault_without_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVAL_TEST_KEY", "sk-wrong-key-value")
    with served_reference(ServeConfig(api_key=SECRET)) as server:
        runtime = build_runtime(
            f"openai:{server.base_url}", {"model": "m", "api_key_env": "EVAL_TEST_KEY", "max_retries": 3}
        )
        transcripts = drive(runtime, _threads({"a": ["What is truth?"]}))
        runtime.close()
    assert transcripts["error"].iloc[0].startswith("TurnFault: HTTP 401")
    assert transcripts["attempts"].iloc[0] == 1  # 401 is not retried
    assert "sk-wrong-key-value" not in transcripts.to_csv()


def test_spec_drops_credentials_from_the_url() -> None:
    runtime = build_runtime(f"openai:http://user:{SECRET}@127.0.0.1:9/v1?key={SECRET}", {"model": "m"})
    try:
        assert runtime.spec == "openai:http://127.0.0.1:9/v1"
    finally:
        runtime.close()


def test_unset_key_variable_and_bad_options_are_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVAL_TEST_MISSING", raising=False)
    with pytest.raises(RuntimeSpecError, match="EVAL_TEST_MISSING is not set"):
        build_runtime("openai:http://127.0.0.1:9/v1", {"model": "m", "api_key_env": "EVAL_TEST_MISSING"})
    with pytest.raises(RuntimeSpecError, match=r"model: Field required"):
        build_runtime("openai:http://127.0.0.1:9/v1", {})
    with pytest.raises(RuntimeSpecError, match=r"max_concurency: unknown option"):
        build_runtime("openai:http://127.0.0.1:9/v1", {"model": "m", "max_concurency": 3})
    with pytest.raises(RuntimeSpecError, match="needs a base URL"):
        build_runtime("openai:localhost", {"model": "m"})
    with pytest.raises(RuntimeSpecError, match="python runtime options: workers"):
        build_runtime("python:eval_pipeline_tests.runtimes.bots:CoreStyleRuntime", {"workers": "many"})
    with pytest.raises(RuntimeSpecError, match="has no attribute 'Nope'"):
        build_runtime("python:eval_pipeline_tests.runtimes.bots:Nope", {})
    with pytest.raises(RuntimeSpecError, match="cannot import"):
        build_runtime("python:no_such_module_here:bot", {})


def test_a_python_spec_is_checked_from_its_source_without_running_it(tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    (tmp_path / "unrun_bot_module.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n"
        "from json import dumps as renamed\n"
        "def make(): ...\n"
        "class Bot: ...\n"
        "if True:\n    answer = 42\n"
    )
    (tmp_path / "unrun_star_module.py").write_text("from json import *\n")
    for name in ("make", "Bot", "renamed", "answer", "Bot.chat"):
        check_target(f"unrun_bot_module:{name}", [str(tmp_path)])
    with pytest.raises(RuntimeSpecError, match="has no attribute 'Missing'"):
        check_target("unrun_bot_module:Missing", [str(tmp_path)])
    check_target("unrun_star_module:anything", [str(tmp_path)])  # a star import: only loading can tell
    assert not marker.exists()  # the module never ran in this process
    with pytest.raises(RuntimeSpecError, match="cannot import 'unrun_bot_module'"):
        check_target("unrun_bot_module:make", [])  # not on the path without its option


@pytest.mark.slow
@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("bot = 3\n", "python runtime: unloadable_bot_module:bot is not callable"),
        (
            "raise RuntimeError('no weights file')\nbot = None\n",
            "python runtime: cannot load unloadable_bot_module:bot: RuntimeError: no weights file",
        ),
    ],
)
def test_a_target_the_workers_cannot_load_faults_every_turn_with_the_reason(
    tmp_path: Path, source: str, reason: str
) -> None:
    (tmp_path / "unloadable_bot_module.py").write_text(source)
    runtime = build_runtime("python:unloadable_bot_module:bot", {"workers": 1, "paths": [str(tmp_path)]})
    try:
        transcripts = drive(runtime, _threads({"a": ["What is truth?"], "b": ["What is doubt?"]}))
    finally:
        runtime.close()
    assert list(transcripts["error"]) == [f"TurnFault: runtime_error: {reason}"] * 2


def test_parse_runtime_options() -> None:
    options = parse_runtime_options(
        ["model=gpt-x", "max_retries=3", 'headers={"X-A": "1"}', "flag=true", "name=a=b"]
    )
    assert options == {
        "model": "gpt-x",
        "max_retries": 3,
        "headers": {"X-A": "1"},
        "flag": True,
        "name": "a=b",
    }
    with pytest.raises(RuntimeSpecError, match="expected KEY=VALUE"):
        parse_runtime_options(["novalue"])


def test_python_bot_that_raises_fails_only_its_turn() -> None:
    runtime = build_runtime("python:eval_pipeline_tests.runtimes.bots:FlakyBot", {})
    transcripts = drive(
        runtime,
        _threads({"a": ["What is truth?", "What is a zorp?", "What is doubt?"], "b": ["What is truth?"]}),
        Sending(concurrency=2),
    )
    errors = dict(
        zip(
            zip(transcripts["case_id"], transcripts["turn_index"], strict=True),
            transcripts["error"],
            strict=True,
        )
    )
    assert errors[("a", 1)] == "ValueError: flaky bot cannot handle zorps"
    assert all(pd.isna(errors[k]) for k in [("a", 0), ("a", 2), ("b", 0)])


@pytest.mark.slow
def test_exec_crash_and_garbage_fail_their_turns_and_lost_sessions_only() -> None:
    runtime = build_runtime(f"exec:{sys.executable} {EXEC_BOT}", {"workers": 1})
    try:
        transcripts = drive(
            runtime,
            _threads(
                {
                    "a": ["What is truth?", "GARBLE please", "What is doubt?", "CRASH now", "What is truth?"],
                    "b": ["What is truth?"],
                }
            ),
        )
    finally:
        runtime.close()
    errors = transcripts.set_index(["case_id", "turn_index"])["error"]
    assert errors.isna()[("a", 0)]
    assert errors[("a", 1)].startswith("TurnFault: malformed_reply: not valid JSON")
    # A line that is not the reply leaves the stream out of step: the child is restarted.
    assert all(errors[("a", i)].startswith("TurnFault: session_lost") for i in (2, 3, 4))
    assert errors.isna()[("b", 0)]  # a new session on the restarted child answers


def test_drive_retries_transient_faults_and_counts_attempts() -> None:
    from eval_pipeline.runtimes.base import Capabilities, ChatSession, TurnResponse
    from eval_pipeline.runtimes.faults import RetryPolicy, TurnFault

    class Stutter:
        """Fails each prompt transiently as many times as the prompt's number says."""

        def __init__(self) -> None:
            self.seen: dict[str, int] = {}

        def send(self, prompt: str) -> TurnResponse:
            self.seen[prompt] = self.seen.get(prompt, 0) + 1
            if self.seen[prompt] <= int(prompt):
                raise TurnFault("busy", transient=True, retry_after=0.0)
            return TurnResponse(surface=f"answer {prompt}.")

        def close(self) -> None:
            pass

    class StutterRuntime:
        spec = "test:stutter"
        capabilities = Capabilities()

        def open_session(self, session_id: str) -> ChatSession:
            return Stutter()

        def close(self) -> None:
            pass

    transcripts = drive(
        StutterRuntime(),
        _threads({"a": ["0", "2", "5"]}),
        Sending(retry=RetryPolicy(max_retries=3, backoff_s=0.0)),
    )
    assert list(transcripts["attempts"]) == [1, 3, 4]
    assert list(transcripts["error"].isna()) == [True, True, False]
    assert transcripts["error"].iloc[2] == "TurnFault: busy"


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after-ms": "soon", "retry-after": "9"}, 9.0),
        ({"retry-after": "2.5"}, 2.5),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # a date gone by: no wait
        ({"retry-after": "after lunch"}, None),  # unreadable: no wait asked, not a crash
        ({"retry-after": "inf"}, None),  # Python reads these as floats; HTTP does not
        ({"retry-after": "nan"}, None),
        ({"retry-after-ms": "inf", "retry-after": "3"}, 3.0),
        ({}, None),
    ],
)
def test_retry_after_is_read_from_either_header_or_not_at_all(
    headers: dict[str, str], seconds: float | None
) -> None:
    assert retry_after_s(headers) == seconds
