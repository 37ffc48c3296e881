"""The journal file: records that check, a torn tail and a hand-edited line skipped with a
warning, a journal of another series identity refused with the difference, a live run's
journal never taken by another."""

from __future__ import annotations

import os
import time
import tracemalloc
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.run.journal import (
    CorruptRecord,
    JournalIdentity,
    decode_record,
    encode_record,
    open_journal,
    read_journal,
)
from eval_pipeline.runtimes.base import RuntimeSpecError

IDENTITY = JournalIdentity(
    lane="lane_a",
    split="dev",
    case_set="dev",
    cases_sha256="c" * 64,
    runtime="reference",
    runtime_version="0123456789abcdef",
    samples=1,
    seed=None,
)


def rows(case_id: str, turns: int = 2) -> list[dict[str, Any]]:
    return [
        {
            "case_id": case_id,
            "turn_index": i,
            "role": "turn",
            "prompt": f"p{i} é",
            "surface": f"answer {i}\nsecond line",
            "grounding_source": None,
            "surface_tag": None,
            "epistemic_status": None,
            "latency_ms": 12.345678901234,
            "attempts": 1,
            "error": None,
            "raw": None,
            "sample_index": 0,
            "seed": None,
            "prompt_tokens": 12,
            "completion_tokens": 3,
            "cost": None,
            "cached": False,
            "ttft_ms": None,
        }
        for i in range(turns)
    ]


def journal_with(root: Path, run_id: str, cases: list[str]) -> Path:
    opened = open_journal(root, IDENTITY, run_id, resume=False)
    for case in cases:
        opened.writer.append_session(case, 0, rows(case))
    opened.writer.close()
    return opened.writer.path


def test_a_record_checks_its_length_and_checksum() -> None:
    line = encode_record({"session": "a", "rows": [{"surface": "x\ny"}]})
    assert line.endswith(b"\n") and line.count(b"\n") == 1  # a newline inside a value is escaped
    assert decode_record(line[:-1]) == {"session": "a", "rows": [{"surface": "x\ny"}]}
    with pytest.raises(CorruptRecord, match="bytes, the record says"):
        decode_record(line[:-3])
    edited = line[:-3] + b"z" + line[-2:-1]
    with pytest.raises(CorruptRecord, match="checksum"):
        decode_record(edited)


def test_written_sessions_are_read_back_exactly(tmp_path: Path) -> None:
    path = journal_with(tmp_path, "run-1", ["case_a", "case_b"])
    contents = read_journal(path)
    assert contents.identity == IDENTITY
    assert contents.warnings == []
    assert contents.sessions == {("case_a", 0): rows("case_a"), ("case_b", 0): rows("case_b")}


def test_a_torn_tail_is_skipped_with_a_warning_and_cut_off_before_appending(tmp_path: Path) -> None:
    path = journal_with(tmp_path, "run-1", ["case_a", "case_b"])
    whole = path.read_bytes()
    path.write_bytes(whole[:-20])  # killed while writing case_b's record
    contents = read_journal(path)
    assert set(contents.sessions) == {("case_a", 0)}
    assert len(contents.warnings) == 1 and "run-1.journal:3: skipped" in contents.warnings[0]
    assert "cut off" in contents.warnings[0]

    resumed = open_journal(tmp_path, IDENTITY, "run-2", resume=True)
    assert set(resumed.answered) == {("case_a", 0)} and resumed.warnings == contents.warnings
    resumed.writer.append_session("case_b", 0, rows("case_b"))
    resumed.writer.close()
    assert not path.exists() and resumed.writer.path.name == "run-2.journal"
    again = read_journal(resumed.writer.path)
    assert again.warnings == []
    assert again.sessions == {("case_a", 0): rows("case_a"), ("case_b", 0): rows("case_b")}


def test_a_hand_edited_line_is_skipped_and_the_others_are_kept(tmp_path: Path) -> None:
    path = journal_with(tmp_path, "run-1", ["case_a", "case_b", "case_c"])
    lines = path.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b"answer 1", b"answer 9")  # case_b's record, same length
    path.write_bytes(b"\n".join(lines))
    contents = read_journal(path)
    assert set(contents.sessions) == {("case_a", 0), ("case_c", 0)}
    assert (
        len(contents.warnings) == 1
        and ":3: skipped" in contents.warnings[0]
        and "checksum" in contents.warnings[0]
    )


@pytest.mark.parametrize(
    ("changed", "named"),
    [
        (replace(IDENTITY, runtime_version="fedcba9876543210"), "runtime_version"),
        (replace(IDENTITY, cases_sha256="d" * 64), "cases_sha256"),
        (replace(IDENTITY, samples=3), "samples"),
        (replace(IDENTITY, seed=7), "seed"),
        (replace(IDENTITY, runtime_version=None), "runtime version of 'reference' could not be told"),
    ],
    ids=["runtime-version", "cases", "samples", "seed", "version-unknown"],
)
def test_a_journal_of_another_identity_is_refused_with_the_difference(
    tmp_path: Path, changed: JournalIdentity, named: str
) -> None:
    path = journal_with(tmp_path, "run-1", ["case_a"])
    with pytest.raises(RuntimeSpecError, match=f"cannot resume.*{named}.*this run") as refused:
        open_journal(tmp_path, changed, "run-2", resume=True)
    assert "without --resume" in str(refused.value)
    assert path.exists() and read_journal(path).sessions  # refused: nothing taken over


def test_resuming_with_no_journal_starts_afresh_and_says_so(tmp_path: Path) -> None:
    opened = open_journal(tmp_path, IDENTITY, "run-1", resume=True)
    opened.writer.close()
    assert opened.answered == {} and "no journal of this series" in opened.note and "afresh" in opened.note
    assert read_journal(opened.writer.path).identity == IDENTITY


def test_resuming_while_a_live_run_holds_a_journal_of_the_series_is_refused(tmp_path: Path) -> None:
    interrupted = journal_with(tmp_path, "run-0", ["case_b"])
    live = open_journal(tmp_path, IDENTITY, "run-1", resume=False)
    live.writer.append_session("case_a", 0, rows("case_a"))
    try:
        with pytest.raises(RuntimeSpecError, match="a live run of this series holds this journal"):
            open_journal(tmp_path, IDENTITY, "run-2", resume=True)
        assert live.writer.path.exists() and interrupted.exists()  # nothing taken, nothing created
        assert not (live.writer.path.parent / "run-2.journal").exists()
    finally:
        live.writer.close()


def test_sessions_reach_the_disk_without_closing(tmp_path: Path) -> None:
    opened = open_journal(tmp_path, IDENTITY, "run-1", resume=False)
    try:
        opened.writer.append_session("case_a", 0, rows("case_a"))
        deadline = time.monotonic() + 10
        while ("case_a", 0) not in read_journal(opened.writer.path).sessions:
            assert time.monotonic() < deadline, "the journal never wrote the session"
            time.sleep(0.05)
    finally:
        opened.writer.close()


def test_a_fresh_run_says_it_leaves_an_interrupted_runs_journal_unused(tmp_path: Path) -> None:
    journal_with(tmp_path, "run-1", ["case_a"])
    fresh = open_journal(tmp_path, IDENTITY, "run-2", resume=False)
    fresh.writer.close()
    assert fresh.answered == {}
    assert fresh.note.startswith("1 other journal(s) of this series") and "--resume" in fresh.note
    alone = open_journal(tmp_path / "elsewhere", IDENTITY, "run-3", resume=False)
    alone.writer.close()
    assert alone.note == ""


def test_a_journal_whose_run_is_committed_is_removed_and_never_resumed(tmp_path: Path) -> None:
    older = journal_with(tmp_path, "run-0", ["case_a"])
    time.sleep(0.01)
    committed = journal_with(tmp_path, "run-1", ["case_a", "case_b"])  # killed after its commit
    with pytest.raises(RuntimeSpecError, match="run run-1 is already committed to history") as refused:
        open_journal(tmp_path, IDENTITY, "run-2", resume=True, is_committed=lambda run_id: run_id == "run-1")
    assert "1 older journal(s)" in str(refused.value) and "without --resume" in str(refused.value)
    assert not committed.exists() and not older.exists()  # what the commit would have removed
    assert not (tmp_path / IDENTITY.lane / IDENTITY.case_set / IDENTITY.runtime / "run-2.journal").exists()


def test_a_newer_interrupted_journal_is_resumed_past_a_committed_older_one(tmp_path: Path) -> None:
    journal_with(tmp_path, "run-1", ["case_a"])  # committed, its journal left by a kill
    time.sleep(0.01)
    journal_with(tmp_path, "run-2", ["case_a", "case_b"])  # a later run, interrupted
    resumed = open_journal(
        tmp_path, IDENTITY, "run-3", resume=True, is_committed=lambda run_id: run_id == "run-1"
    )
    resumed.writer.close()
    assert set(resumed.answered) == {("case_a", 0), ("case_b", 0)}
    assert resumed.resumed_from is not None and resumed.resumed_from.stem == "run-2"


def test_an_empty_journal_is_removed_and_the_older_good_one_resumed(tmp_path: Path) -> None:
    good = journal_with(tmp_path, "run-1", ["case_a", "case_b"])
    time.sleep(0.01)
    empty = good.with_name("run-2.journal")
    empty.touch()  # a run killed as it created its journal
    resumed = open_journal(tmp_path, IDENTITY, "run-3", resume=True)
    resumed.writer.close()
    assert set(resumed.answered) == {("case_a", 0), ("case_b", 0)} and resumed.resumed_from == good
    assert not empty.exists()
    assert any("run-2.journal: an empty journal" in warning for warning in resumed.warnings)


def test_a_headerless_journal_is_skipped_with_a_warning_and_left_alone(tmp_path: Path) -> None:
    good = journal_with(tmp_path, "run-1", ["case_a"])
    time.sleep(0.01)
    junk = good.with_name("run-2.journal")
    junk.write_bytes(b"not a journal\n")
    resumed = open_journal(tmp_path, IDENTITY, "run-3", resume=True)
    resumed.writer.close()
    assert set(resumed.answered) == {("case_a", 0)} and junk.exists()
    assert any("run-2.journal: skipped: not a journal" in warning for warning in resumed.warnings)


def test_a_fresh_journal_holds_its_header_from_the_moment_it_exists(tmp_path: Path) -> None:
    opened = open_journal(tmp_path, IDENTITY, "run-1", resume=False)
    try:
        assert read_journal(opened.writer.path).identity == IDENTITY  # no background flush awaited
        assert [path.name for path in opened.writer.path.parent.iterdir() if path.suffix == ".tmp"] == []
    finally:
        opened.writer.close()


def test_each_session_is_handed_to_the_file_as_it_is_appended(tmp_path: Path) -> None:
    opened = open_journal(tmp_path, IDENTITY, "run-1", resume=False)
    try:
        for case in ("case_a", "case_b", "case_c"):
            opened.writer.append_session(case, 0, rows(case))
            assert (case, 0) in read_journal(opened.writer.path).sessions  # at once: a kill loses it not
    finally:
        opened.writer.close()


POISONS: dict[str, tuple[Any, str]] = {
    "rows-of-numbers": ([1, 2, 3, 4], "turn 1: a row is 1, expected an object"),
    "no-surface": ([{k: v for k, v in rows("case_b")[0].items() if k != "surface"}], "a row has no surface"),
    "null-surface": ([{**rows("case_b")[0], "surface": None}], "an answered turn has no surface"),
    "wrong-type": ([{**rows("case_b")[0], "turn_index": "0"}], "turn_index is '0', expected a whole number"),
    "huge-tokens": ([{**rows("case_b")[0], "prompt_tokens": 10**29}], "prompt_tokens is 1000"),
    "infinite-cost": ([{**rows("case_b")[0], "cost": float("inf")}], "cost is inf, expected a finite number"),
    "rows-not-a-list": ({"a": 1}, "its rows are not a list of turns"),
}


@pytest.mark.parametrize("poison", list(POISONS))
def test_a_record_of_the_wrong_shape_is_skipped_and_sent_again(tmp_path: Path, poison: str) -> None:
    bad_rows, said = POISONS[poison]
    opened = open_journal(tmp_path, IDENTITY, "run-1", resume=False)
    opened.writer.append_session("case_a", 0, rows("case_a"))
    opened.writer.append({"session": "case_b", "sample_index": 0, "rows": bad_rows})  # checksum holds
    opened.writer.append_session("case_c", 0, rows("case_c"))
    opened.writer.close()
    resumed = open_journal(tmp_path, IDENTITY, "run-2", resume=True)
    resumed.writer.close()
    assert set(resumed.answered) == {("case_a", 0), ("case_c", 0)}
    (warning,) = resumed.warnings
    assert "run-1.journal:3: skipped, its session is sent again" in warning and said in warning


@pytest.mark.parametrize(
    ("field_name", "value"), [("samples", "1"), ("seed", 1.5), ("cases_sha256", None), ("lane", 7)]
)
def test_a_header_of_the_wrong_types_is_not_a_journal(tmp_path: Path, field_name: str, value: Any) -> None:
    folder = tmp_path / IDENTITY.lane / IDENTITY.case_set / IDENTITY.runtime
    folder.mkdir(parents=True)
    header = {"journal": 1, "identity": {**asdict(IDENTITY), field_name: value}}
    (folder / "run-1.journal").write_bytes(encode_record(header))
    contents = read_journal(folder / "run-1.journal")
    assert contents.identity is None
    assert f"not a journal header: {field_name} is {value!r}" in contents.warnings[0]


def test_reading_a_big_journal_holds_a_line_at_a_time(tmp_path: Path) -> None:
    opened = open_journal(tmp_path, IDENTITY, "run-1", resume=False)
    for index in range(2_000):
        opened.writer.append_session(f"case_{index:05d}", 0, rows(f"case_{index:05d}", turns=20))
    opened.writer.close()
    size = opened.writer.path.stat().st_size
    tracemalloc.start()
    try:
        contents = read_journal(opened.writer.path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(contents.sessions) == 2_000 and size > 8_000_000
    assert peak < size // 8, (peak, size)  # the index of where each record lies, not the records
    assert contents.sessions[("case_01234", 0)] == rows("case_01234", turns=20)


def test_a_closed_journal_takes_no_more_records(tmp_path: Path) -> None:
    opened = open_journal(tmp_path, IDENTITY, "run-1", resume=False)
    opened.writer.close()
    with pytest.raises(RuntimeError, match="the journal is closed"):
        opened.writer.append_session("case_a", 0, rows("case_a"))
    assert read_journal(opened.writer.path).sessions == {}


def test_a_folder_pipe_or_link_bearing_a_journals_name_is_passed_over(tmp_path: Path) -> None:
    good = journal_with(tmp_path, "run-1", ["case_a"])
    time.sleep(0.01)
    (good.parent / "folder.journal").mkdir()
    os.mkfifo(good.parent / "pipe.journal")  # reading it would wait for ever
    elsewhere = journal_with(tmp_path / "other", "run-0", ["case_b"])
    (good.parent / "link.journal").symlink_to(elsewhere)
    resumed = open_journal(tmp_path, IDENTITY, "run-2", resume=True)
    resumed.writer.close()
    assert set(resumed.answered) == {("case_a", 0)} and resumed.resumed_from == good
    assert elsewhere.exists() and (good.parent / "folder.journal").is_dir()
