"""exec: protocol v2 against real misbehaving children: every misbehaviour is a recorded fault, in time, with no survivors."""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from eval_pipeline.lanes.kind import Thread, TurnRequest
from eval_pipeline.run.drive import Sending, drive
from eval_pipeline.runtimes import RuntimeSpecError, build_runtime
from eval_pipeline.runtimes.adapters.exec_process import StreamFault, parse_reply_line, take_line
from eval_pipeline.runtimes.reference import ReferenceRuntime
from eval_pipeline_tests.paths import PROJECT_ROOT

EXEC_BOT = Path(__file__).with_name("exec_bot.py")
ONE_MB_PROMPT = "What is truth? " + "x" * 1_000_000

needs_proc = pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="reads the process table in /proc"
)


def _threads(prompts_by_case: dict[str, list[str]]) -> list[Thread]:
    return [
        Thread(
            case_id=case_id,
            turns=tuple(TurnRequest(turn_index=i, role="turn", prompt=p) for i, p in enumerate(prompts)),
        )
        for case_id, prompts in prompts_by_case.items()
    ]


def _reference_surfaces(prompts_by_case: dict[str, list[str]]) -> dict[tuple[str, int], str]:
    """What the bot answers when it behaves: the reference runtime, one session per case."""
    reference = ReferenceRuntime()
    surfaces = {}
    for case_id, prompts in prompts_by_case.items():
        session = reference.open_session(case_id)
        for turn_index, prompt in enumerate(prompts):
            surfaces[(case_id, turn_index)] = session.send(prompt).surface
    return surfaces


def _live_processes() -> dict[int, int]:
    """pid → process group of every process that is not a zombie."""
    live = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # exited while we looked
            continue
        state, _ppid, pgrp = text[text.rindex(")") + 2 :].split()[:3]
        if state not in ("Z", "X"):
            live[int(stat.parent.name)] = int(pgrp)
    return live


def _survivors(pids_file: Path, settle_s: float = 5.0) -> set[int]:
    """Processes the bot recorded (children, grandchildren) or sharing their groups, still alive.

    SIGKILL is delivered at once but a process leaves the table a moment later, so look for
    up to ``settle_s`` before calling anything a survivor.
    """
    recorded = [tuple(map(int, line.split())) for line in pids_file.read_text().splitlines()]
    groups = {pgid for pgid, _ in recorded}
    pids = {pid for _, pid in recorded}
    deadline = time.monotonic() + settle_s
    while True:
        live = _live_processes()
        survivors = {pid for pid, pgrp in live.items() if pgrp in groups or pid in pids}
        if not survivors or time.monotonic() > deadline:
            return survivors
        time.sleep(0.05)


def _spec(*bot_args: str) -> str:
    return f"exec:{shlex.join([sys.executable, str(EXEC_BOT), *bot_args])}"


@dataclass(frozen=True)
class Misbehaviour:
    name: str
    prompt: str
    error_prefix: str
    # A timeout must leave room for a loaded machine's cold start of the bot (seconds).
    timeout_s: float = 60.0
    bot_args: tuple[str, ...] = ()
    processes: int = 1  # the bot, and the grandchildren it starts before the fault

    @property
    def recorded_within_s(self) -> float:
        """A timeout fault: the timeout and a kill. Any other: at once, far inside the timeout."""
        return self.timeout_s + 3.0 if self.error_prefix.startswith("timeout") else self.timeout_s / 3


MISBEHAVIOURS = [
    Misbehaviour(
        "never reads stdin",
        ONE_MB_PROMPT,
        "timeout: the request was not read within 3s",
        timeout_s=3.0,
        bot_args=("--never-read",),
    ),
    Misbehaviour(
        "hangs with a grandchild", "HANG What is truth?", "timeout: no reply within 10s", 10.0, processes=2
    ),
    Misbehaviour("50 MB reply", "HUGE What is truth?", "reply_too_large: a reply line longer than 1000000"),
    Misbehaviour("not UTF-8", "BYTES What is truth?", "malformed_reply: not UTF-8"),
    Misbehaviour("dies mid-turn", "CRASH What is truth?", "runtime_exited: runtime process exited (code 3)"),
]


@needs_proc
@pytest.mark.slow
@pytest.mark.parametrize("misbehaviour", MISBEHAVIOURS, ids=lambda m: m.name)
def test_misbehaving_child_is_a_recorded_fault_in_time_and_leaves_no_process(
    misbehaviour: Misbehaviour, tmp_path: Path
) -> None:
    pids_file = tmp_path / "pids"
    pids_file.touch()
    prompts = {"bad": [misbehaviour.prompt, "What is doubt?"]}
    if not misbehaviour.bot_args:  # a restarted child is healthy: it serves the next session
        prompts["good"] = ["What is truth?", "What is doubt?"]
    runtime = build_runtime(
        _spec(*misbehaviour.bot_args, "--pid-file", str(pids_file)),
        {"workers": 1, "timeout_s": misbehaviour.timeout_s},
    )
    try:
        transcripts = drive(runtime, _threads(prompts)).set_index(["case_id", "turn_index"])
        # The faulted child was killed with its group then and there, not at close.
        recorded = [tuple(map(int, line.split())) for line in pids_file.read_text().splitlines()]
        first_group = recorded[0][0]
        assert len([pid for pgid, pid in recorded if pgid == first_group]) == misbehaviour.processes
        assert first_group not in runtime.process_groups
        assert _survivors_in(first_group) == set()
    finally:
        runtime.close()

    bad = transcripts.loc[("bad", 0)]
    assert str(bad["error"]).startswith(f"TurnFault: {misbehaviour.error_prefix}"), bad["error"]
    assert pd.isna(bad["surface"])
    assert bad["latency_ms"] < misbehaviour.recorded_within_s * 1000
    assert str(transcripts.loc[("bad", 1), "error"]).startswith("TurnFault: session_lost")
    # Never a wrong answer: whatever was recorded as answered is what the bot means to say.
    expected = _reference_surfaces(prompts)
    answered = transcripts[transcripts["error"].isna()]
    assert {key: row["surface"] for key, row in answered.iterrows()} == {
        key: expected[key] for key in answered.index
    }
    assert answered.index.tolist() == ([("good", 0), ("good", 1)] if "good" in prompts else [])
    assert _survivors(pids_file) == set()


def _survivors_in(pgid: int, settle_s: float = 5.0) -> set[int]:
    deadline = time.monotonic() + settle_s
    while True:
        survivors = {pid for pid, pgrp in _live_processes().items() if pgrp == pgid}
        if not survivors or time.monotonic() > deadline:
            return survivors
        time.sleep(0.05)


@needs_proc
@pytest.mark.slow
def test_an_extra_line_never_puts_another_sessions_answer_on_record(tmp_path: Path) -> None:
    pids_file = tmp_path / "pids"
    pids_file.touch()
    prompts = {
        "a": ["What is truth?", "What is doubt?"],
        "b": ["What is doubt?", "What is truth? EXTRA"],  # answers, then writes its answer again
        "c": ["What is doubt?", "What is truth?"],
        "d": ["What is truth?", "What is doubt?"],
    }
    runtime = build_runtime(_spec("--pid-file", str(pids_file)), {"workers": 1, "timeout_s": 30})
    try:
        transcripts = drive(runtime, _threads(prompts)).set_index(["case_id", "turn_index"])
    finally:
        runtime.close()
    errors = transcripts["error"]
    expected = _reference_surfaces(prompts)
    answered = transcripts[errors.isna()]
    assert {key: row["surface"] for key, row in answered.iterrows()} == {
        key: expected[key] for key in answered.index
    }
    assert ("b", 1) in answered.index  # the turn that wrote the extra line had answered first
    # The next request, another session's, reads b's stale line: a mismatch, at once.
    assert errors[("c", 0)].startswith("TurnFault: protocol_mismatch: the reply echoes id 'b:1#")
    assert transcripts.loc[("c", 0), "latency_ms"] < 10_000
    assert errors[("c", 1)].startswith("TurnFault: session_lost")
    assert errors.isna()[("d", 0)] and errors.isna()[("d", 1)]
    assert _survivors(pids_file) == set()


@needs_proc
@pytest.mark.slow
def test_killing_the_pipeline_kills_every_child_group(tmp_path: Path) -> None:
    pids_file = tmp_path / "pids"
    pids_file.touch()
    spec = _spec("--pid-file", str(pids_file))
    pipeline = f"""
import sys, threading, time
from eval_pipeline.runtimes import build_runtime
runtime = build_runtime({spec!r}, {{"workers": 2, "timeout_s": 600}})
first, second = runtime.open_session("a"), runtime.open_session("b")
first.send("What is truth?")
second.send("What is truth?")
threading.Thread(target=second.send, args=("HANG",), daemon=True).start()
print("ready", flush=True)
time.sleep(600)
"""
    parent = subprocess.Popen([sys.executable, "-c", pipeline], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        assert parent.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 30
        while len(pids_file.read_text().splitlines()) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)  # two children and the hanging one's grandchild
        recorded = pids_file.read_text().splitlines()
        assert len(recorded) == 3
        live = _live_processes()
        assert all(int(line.split()[1]) in live for line in recorded)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    assert _survivors(pids_file) == set()


def test_reply_size_cap_is_an_option(tmp_path: Path) -> None:
    prompts = {"a": ["What is truth?"]}
    capped = build_runtime(_spec(), {"max_reply_bytes": 50, "timeout_s": 30})
    uncapped = build_runtime(_spec(), {"timeout_s": 30})
    try:
        capped_error = drive(capped, _threads(prompts))["error"].iloc[0]
        uncapped_error = drive(uncapped, _threads(prompts))["error"].iloc[0]
    finally:
        capped.close()
        uncapped.close()
    assert capped_error.startswith("TurnFault: reply_too_large: a reply line longer than 50 bytes")
    assert pd.isna(uncapped_error)


def test_a_command_that_cannot_run_is_bad_input() -> None:
    with pytest.raises(RuntimeSpecError, match="'no-such-runtime-here' is not an executable file on PATH"):
        build_runtime("exec:no-such-runtime-here --flag", {})
    with pytest.raises(RuntimeSpecError, match="max_reply_bytes"):
        build_runtime(_spec(), {"max_reply_bytes": 0})


@pytest.mark.parametrize(
    ("stream", "line", "rest"),
    [
        (b'{"id": "a:0#1"}\n', b'{"id": "a:0#1"}', b""),
        (b'\n  \r\n{"id": 1}\r\nnext', b'{"id": 1}', b"next"),  # blank lines skipped, CRLF tolerated
        (b'{"id": "a:0#1", "surface": "par', None, b'{"id": "a:0#1", "surface": "par'),
    ],
)
def test_take_line(stream: bytes, line: bytes | None, rest: bytes) -> None:
    pending = bytearray(stream)
    assert take_line(pending, 100) == line
    assert bytes(pending) == rest


def test_take_line_caps_a_line_complete_or_not() -> None:
    for stream in (b"x" * 101 + b"\n", b"x" * 101):
        with pytest.raises(StreamFault, match="reply_too_large"):
            take_line(bytearray(stream), 100)
    assert take_line(bytearray(b"x" * 100 + b"\r\n"), 100) == b"x" * 100


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        (b'{"surface": "v1 reply"}', "protocol_mismatch"),
        (b'{"id": "b:0#1", "surface": "another request"}', "protocol_mismatch"),
        (b'{"id": "a:0#1", "surface": "caf\xe9"}', "malformed_reply"),
        (b"not json", "malformed_reply"),
        (b'["id", "a:0#1"]', "malformed_reply"),
        (b"[" * 100_000 + b"]" * 100_000, "malformed_reply"),
    ],
)
def test_parse_reply_line_rejects_what_is_not_this_requests_reply(line: bytes, kind: str) -> None:
    with pytest.raises(StreamFault) as raised:
        parse_reply_line(line, "a:0#1")
    assert raised.value.kind == kind


def test_parse_reply_line_accepts_the_echoed_id() -> None:
    assert parse_reply_line('{"id": "a:0#1", "surface": "é"}'.encode(), "a:0#1") == {
        "id": "a:0#1",
        "surface": "é",
    }


def _manual_example_child() -> str:
    page = (PROJECT_ROOT / "docs" / "runtimes.md").read_text(encoding="utf-8")
    section = page.split("## The `exec:` protocol", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert block is not None, "the exec: protocol section has no example child"
    return block.group(1)


@pytest.mark.slow
def test_the_manual_example_child_speaks_the_protocol(tmp_path: Path) -> None:
    child = tmp_path / "child.py"
    child.write_text(_manual_example_child(), encoding="utf-8")
    runtime = build_runtime(
        f"exec:{shlex.join([sys.executable, str(child)])}", {"workers": 2, "end_sessions": True}
    )
    try:
        transcripts = drive(runtime, _threads({"a": ["hi", "again"], "b": ["hello"]}), Sending(concurrency=2))
    finally:
        runtime.close()
    assert transcripts["error"].isna().all(), transcripts["error"].tolist()
    assert transcripts["surface"].tolist() == [
        "Turn 1: you asked 'hi'.",
        "Turn 2: you asked 'again'.",
        "Turn 1: you asked 'hello'.",
    ]
