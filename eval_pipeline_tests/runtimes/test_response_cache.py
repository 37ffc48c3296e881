"""The response cache: keyed by runtime version and the whole request, a session at a time,
safe across processes, corrupt entries skipped and sent again. Requests are counted at a real
local server."""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.lanes.kind import Thread, TurnRequest
from eval_pipeline.metrics.usage import CACHED_TURNS, LATENCY_PERCENTILES, TTFT_PERCENTILES
from eval_pipeline.run.drive import Books, Sending, drive
from eval_pipeline.runtimes import build_runtime
from eval_pipeline.runtimes.cache import ANSWER_FIELDS, ResponseCache, cache_root, cache_usage, target_cache
from eval_pipeline.runtimes.serve import MODELS_PATH, ReferenceServer, _Handler, model_card
from eval_pipeline_tests.runtimes.scripted_server import completion, json_reply, scripted

PROMPTS = ("What is a river?", "What is a mountain?")
# How a run's answers were got, not what they were: a cached run sent nothing and timed nothing.
HOW_ANSWERED = {CACHED_TURNS, *(n for n, _ in LATENCY_PERCENTILES), *(n for n, _ in TTFT_PERCENTILES)}
ANSWERS = [
    "case_id",
    "sample_index",
    "turn_index",
    "surface",
    "raw",
    "prompt_tokens",
    "completion_tokens",
    "seed",
]


def threads(cases: int = 3) -> list[Thread]:
    return [
        Thread(
            case_id=f"case_{i}",
            turns=tuple(
                TurnRequest(turn_index=t, role="turn", prompt=f"{p} ({i})") for t, p in enumerate(PROMPTS)
            ),
        )
        for i in range(cases)
    ]


class _TwoModelsHandler(_Handler):
    """The reference server listing a second model, so a target can change its model."""

    def do_GET(self) -> None:
        if self.path.rstrip("/") == MODELS_PATH:
            listed = {"object": "list", "data": [model_card("reference"), model_card("reference-2")]}
            self._send_json(HTTPStatus.OK, listed, self.server.next_serial())
            return
        super().do_GET()


@contextmanager
def counting_server() -> Iterator[ReferenceServer]:
    server = ReferenceServer(0)
    server.RequestHandlerClass = _TwoModelsHandler
    server.start_background()
    try:
        yield server
    finally:
        server.stop()


def driven(
    server: ReferenceServer, *, model: str = "reference", repeat: int = 1, seed: int | None = None
) -> pd.DataFrame:
    options = {"model": model}
    spec = f"openai:{server.base_url}"
    cache = target_cache(spec, options)
    runtime = build_runtime(spec, options)
    try:
        return drive(
            runtime, threads(), Sending(concurrency=4, repeat=repeat, seed=seed), books=Books(cache=cache)
        )
    finally:
        runtime.close()
        cache.close()


def test_a_second_identical_run_sends_nothing_and_records_the_same_answers() -> None:
    with counting_server() as server:
        first = driven(server)
        sent = server.requests
        second = driven(server)
        assert sent == len(first) == 6 and server.requests == sent  # 0 requests the second time
    assert not first["cached"].any() and second["cached"].all()
    assert second["latency_ms"].isna().all() and (second["attempts"] == 0).all()
    pd.testing.assert_frame_equal(first[ANSWERS], second[ANSWERS])


def test_repeat_samples_never_share_an_answer() -> None:
    with counting_server() as server:
        first = driven(server, repeat=5, seed=7)
        assert server.requests == 5 * 6
        second = driven(server, repeat=5, seed=7)
        assert server.requests == 5 * 6
    assert second["cached"].all() and sorted(set(second["sample_index"])) == [0, 1, 2, 3, 4]
    pd.testing.assert_frame_equal(first[ANSWERS], second[ANSWERS])
    assert first.groupby("case_id")["seed"].nunique().eq(5).all()  # each sample its own seed, own entry


def test_a_new_model_or_seed_misses_the_old_entries() -> None:
    with counting_server() as server:
        driven(server)
        driven(server, model="reference-2")  # a new runtime version: every session is sent again
        assert server.requests == 2 * 6
        driven(server, seed=3)  # another request (its seed)
        assert server.requests == 3 * 6
        driven(server, model="reference-2")
        assert server.requests == 3 * 6
    assert len({u.runtime_version for u in cache_usage()}) == 2


def test_a_session_with_a_fault_is_not_kept(tmp_path: Path) -> None:
    answer = json_reply(completion({"content": "An answer."}))
    refusal = json_reply({"error": {"message": "bad request"}}, status=400)
    with scripted(answer, answer, refusal) as server:  # case_0's two turns answered, then refusals
        cache = ResponseCache("v1", tmp_path)
        runtime = build_runtime(f"openai:{server.base_url}", {"model": "m"})
        try:
            rows = drive(runtime, threads(2), Sending(concurrency=1), books=Books(cache=cache))
        finally:
            runtime.close()
    assert rows.loc[rows["case_id"] == "case_1", "error"].notna().all()
    assert cache.counts.stored == 1 and cache.counts.misses == 2  # case_1 is sent again next time


def _last_line(data: bytes) -> tuple[bytes, bytes]:
    """A segment's bytes before its last line, and that line (with its newline)."""
    body = data.rstrip(b"\n")
    cut = body.rfind(b"\n") + 1
    return data[:cut], data[cut:]


@pytest.mark.parametrize(
    "damage",
    [
        lambda line: line[: len(line) // 2],  # killed mid-write: the last line has no end
        lambda line: line.replace(b"River", b"Rivet").replace(b"river", b"rivet"),  # hand-edited
        lambda line: b"garbage\n",
        lambda line: line[:140] + b"\xff\xfe" + line[142:],  # not UTF-8 any more
    ],
)
def test_a_corrupt_entry_is_skipped_with_a_warning_and_sent_again(
    damage: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with counting_server() as server:
        first = driven(server)
        (segment,) = sorted(cache_root().rglob("*.log"))
        before, last = _last_line(segment.read_bytes())
        assert before.count(b"\n") == 2 and last.endswith(b"\n")  # three sessions, a line each
        damaged = damage(last)
        assert damaged != last
        segment.write_bytes(before + damaged)
        with caplog.at_level(logging.WARNING, logger="eval_pipeline.runtimes.cache"):
            second = driven(server)
            third = driven(server)
        assert server.requests == 6 + 2  # only the damaged session's two turns were sent again
    assert [
        r for r in caplog.records if "skipping the entry" in r.getMessage() and str(segment) in r.getMessage()
    ]
    assert second["cached"].sum() == 4 and third["cached"].all()  # the fresh answer is read from then on
    answers = [name for name in ANSWERS if name != "raw"]  # a fresh reply has a fresh response id
    pd.testing.assert_frame_equal(first[answers], second[answers])
    pd.testing.assert_frame_equal(first[answers], third[answers])


def test_an_entry_answers_only_its_own_request(tmp_path: Path) -> None:
    cache = ResponseCache("v1", tmp_path)
    asked = [("c", 0, "turn", "hello")]
    request = cache.request("c", 0, None, asked)
    answer = [{"surface": "hi", "prompt_tokens": 1, "completion_tokens": 1}]
    cache.store(request, answer)
    cache.close()
    reread = ResponseCache("v1", tmp_path)
    expected = {name: None for name in ANSWER_FIELDS} | {
        "surface": "hi",
        "prompt_tokens": 1,
        "completion_tokens": 1,
    }
    assert reread.answers(request) == [expected]
    other = reread.request("c", 1, None, asked)
    assert other.key != request.key and reread.answers(other) is None
    # An entry's line copied under another request's key is refused, not read as that request's answer.
    (segment,) = (tmp_path / "v1").glob("*.log")
    line = segment.read_bytes()
    segment.write_bytes(line + line.replace(request.key.encode(), other.key.encode(), 1))
    copied = ResponseCache("v1", tmp_path)
    assert copied.answers(other) is None and copied.counts.skipped == 1
    assert copied.answers(request) == [expected]


def test_a_cache_answers_alike_before_and_after_writing_an_entry_and_reopened(tmp_path: Path) -> None:
    """An entry is found by its request while it waits for the writer and once written, and by
    its key when the cache is opened again: the same answers all three ways, never another
    sample's or seed's."""
    asked = [("c", 0, "turn", "hello"), ("c", 1, "turn", "and then?")]
    rows = [
        {
            "surface": "hi",
            "raw": '{"id": "1"}',
            "prompt_tokens": 1,
            "completion_tokens": 2,
            "latency_ms": 5.0,
        },
        {"surface": "then this", "grounding_source": "pack", "prompt_tokens": 3, "completion_tokens": 4},
    ]
    expected = [{name: row.get(name) for name in ANSWER_FIELDS} for row in rows]
    cache = ResponseCache("v1", tmp_path)
    request = cache.request("c", 0, 7, asked)
    others = [
        cache.request("c", 1, 7, asked),
        cache.request("c", 0, 8, asked),
        cache.request("d", 0, 7, asked),
    ]
    assert cache.answers(request) is None
    cache.store(request, rows)
    rows[0]["surface"] = "changed after it was stored"  # what was stored is kept, not what the row became
    looked_up = {"pending": cache.answers(cache.request("c", 0, 7, asked))}  # an equal request, built anew
    deadline = time.monotonic() + 10
    segments = tmp_path / "v1"
    while not any(path.stat().st_size for path in segments.glob("*.log")) and time.monotonic() < deadline:
        time.sleep(0.02)
    looked_up["written"] = cache.answers(cache.request("c", 0, 7, asked))
    assert [cache.answers(other) for other in others] == [None] * 3
    cache.close()
    reopened = ResponseCache("v1", tmp_path)
    looked_up["reopened"] = reopened.answers(reopened.request("c", 0, 7, asked))
    assert [reopened.answers(other) for other in others] == [None] * 3
    assert looked_up == dict.fromkeys(("pending", "written", "reopened"), expected)
    assert (cache.counts.hits, cache.counts.misses, cache.counts.stored) == (2, 4, 1)
    assert (reopened.counts.hits, reopened.counts.misses, reopened.counts.skipped) == (1, 3, 0)


def _write_entries(root: str, writer: int) -> None:
    cache = ResponseCache("shared", Path(root))
    for i in range(300):
        request = cache.request(f"s{i}", 0, None, [(f"s{i}", 0, "turn", f"prompt {i}")])
        cache.store(request, [{"surface": f"answer {i}", "raw": json.dumps({"writer": writer})}])
        if i % 50 == 0:
            time.sleep(0.05)  # let the writer thread append while the other process does
    cache.close()


def test_two_processes_writing_at_once_leave_whole_entries(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_write_entries, args=(str(tmp_path), n)) for n in range(2)]
    for process in writers:
        process.start()
    for process in writers:
        process.join(timeout=60)
        assert process.exitcode == 0
    cache = ResponseCache("shared", tmp_path)
    for i in range(300):
        answers = cache.answers(cache.request(f"s{i}", 0, None, [(f"s{i}", 0, "turn", f"prompt {i}")]))
        assert answers is not None and answers[0]["surface"] == f"answer {i}"
    assert cache.counts.skipped == 0
    assert len(list((tmp_path / "shared").glob("*.log"))) == 2  # a segment per writer


runner = CliRunner()


def _run_args(server: ReferenceServer) -> list[str]:
    return [
        "run",
        "--lane",
        "deterministic_fluency",
        "--split",
        "dev",
        "--runtime",
        f"openai:{server.base_url}",
        "-o",
        "model=reference",
        "--cache",
    ]


def _run(server: ReferenceServer, *extra: str) -> dict[str, Any]:
    result = runner.invoke(app, [*_run_args(server), "--json", *extra])
    assert result.exit_code in (0, 1), result.output
    (lane,) = json.loads(result.stdout)["lanes"]
    return dict(lane)


@pytest.mark.slow
def test_the_cli_with_cache_sends_nothing_the_second_time_and_its_metrics_are_the_same() -> None:
    with counting_server() as server:
        first = _run(server, "--repeat", "5")
        turns = int(first["metrics"]["turns_driven"])
        assert server.requests == turns == 5 * 2  # two single-turn cases, five samples each
        second = _run(server, "--repeat", "5")
        assert server.requests == turns
        shown = runner.invoke(app, [*_run_args(server), "--repeat", "5"])
        assert server.requests == turns
    last = shown.stdout.strip().splitlines()[-1]
    assert f"{turns} turns ({turns} from the cache)" in last, shown.stdout
    assert "usage: " in shown.stdout and "latency p50/p95/p99 n/a / n/a / n/a" in shown.stdout
    assert second["metrics"]["cached_turns"] == turns and first["metrics"]["cached_turns"] == 0
    same = {k: v for k, v in first["metrics"].items() if k not in HOW_ANSWERED}
    assert {k: v for k, v in second["metrics"].items() if k not in HOW_ANSWERED} == same
    assert second["metrics"]["latency_p50_ms"] is None and first["metrics"]["latency_p50_ms"] is not None
    stats = runner.invoke(app, ["cache", "stats", "--json"])
    (version,) = json.loads(stats.stdout)["versions"]
    assert version["entries"] == turns
    cleared = runner.invoke(app, ["cache", "clear"])
    assert f"removed {turns} entries" in cleared.stdout and cache_usage() == []


def _poisoned(line: bytes, change: Any) -> bytes:
    """``line`` with its first turn changed by ``change`` and its checksum recomputed (it checks)."""
    key, _, payload = line.rstrip(b"\n").split(b"\t", 2)
    document = json.loads(payload)
    change(document["turns"][0])
    payload = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    return b"\t".join([key, hashlib.sha256(payload).hexdigest().encode(), payload]) + b"\n"


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda turn: turn.update(surface=12345), "surface is 12345, expected text"),
        (lambda turn: turn.update(surface=None), "an answered turn has no surface"),
        (lambda turn: turn.pop("surface"), "a row has no surface"),
        (lambda turn: turn.update(prompt_tokens=10**29), "prompt_tokens is 1000"),
        (lambda turn: turn.update(completion_tokens=1.5), "completion_tokens is 1.5"),
        (lambda turn: turn.update(raw={"usage": 1}), "raw is {'usage': 1}, expected text"),
    ],
    ids=[
        "surface-number",
        "surface-null",
        "surface-missing",
        "huge-tokens",
        "fractional-tokens",
        "raw-object",
    ],
)
def test_an_entry_that_checks_but_does_not_fit_is_skipped_and_sent_again(
    change: Any, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    with counting_server() as server:
        driven(server)
        (segment,) = sorted(cache_root().rglob("*.log"))
        before, last = _last_line(segment.read_bytes())
        segment.write_bytes(before + _poisoned(last, change))
        with caplog.at_level(logging.WARNING, logger="eval_pipeline.runtimes.cache"):
            second = driven(server)
            third = driven(server)
        assert server.requests == 6 + 2  # the poisoned session's two turns were sent again, once
    warned = [r.getMessage() for r in caplog.records if "skipping the entry" in r.getMessage()]
    assert len(warned) == 1 and said in warned[0], warned
    assert second["cached"].sum() == 4 and third["cached"].all()
    assert second["surface"].map(type).eq(str).all()


def test_a_folder_pipe_or_link_bearing_a_segments_name_is_passed_over(tmp_path: Path) -> None:
    cache = ResponseCache("v1", tmp_path)
    request = cache.request("c", 0, None, [("c", 0, "turn", "hello")])
    cache.store(request, [{"surface": "hi", "prompt_tokens": 1, "completion_tokens": 1}])
    cache.close()
    folder = tmp_path / "v1"
    (folder / "folder.log").mkdir()
    os.mkfifo(folder / "pipe.log")  # reading it would wait for ever
    (folder / "link.log").symlink_to("/etc/hostname")
    reread = ResponseCache("v1", tmp_path)
    answers = reread.answers(request)
    assert answers is not None and answers[0]["surface"] == "hi" and reread.counts.skipped == 0
