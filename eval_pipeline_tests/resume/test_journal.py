"""The journal file: records that check, a torn tail and a hand-edited line skipped with a
warning, a journal of another series identity refused with the difference, a live run's
journal never taken by another."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.journal import (
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
            "prompt": f"p{i} é",
            "surface": f"answer {i}\nsecond line",
            "latency_ms": 12.345678901234,
            "error": None,
            "sample_index": 0,
            "seed": None,
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


def test_a_live_runs_journal_is_not_taken(tmp_path: Path) -> None:
    live = open_journal(tmp_path, IDENTITY, "run-1", resume=False)
    live.writer.append_session("case_a", 0, rows("case_a"))
    try:
        other = open_journal(tmp_path, IDENTITY, "run-2", resume=True)
        other.writer.close()
        assert other.answered == {} and "afresh" in other.note
        assert live.writer.path.exists()
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
