"""``run --max-turns`` / ``--max-cost`` and ``--resume`` from the command line, against a real
server on 127.0.0.1 that counts requests: a run stopped by its budget is void (exit 4) and
says what it spent and how far it got; ``--resume`` finishes it and history shows one run; a
damaged journal entry is sent again; a journal of another runtime version is refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from eval_pipeline.cli import app
from eval_pipeline.run.journal import encode_record, read_journal
from eval_pipeline.runtimes.serve import ReferenceServer
from eval_pipeline_tests.resume.helpers import (
    LANE,
    TURNS_PER_THREAD,
    committed_runs,
    journals,
    openai_arguments,
    requests_served,
    write_threads,
)
from eval_pipeline_tests.runtimes.helpers import served_reference

THREADS = 20
CONCURRENCY = 4
MAX_TURNS = 50


@pytest.fixture
def server() -> Iterator[ReferenceServer]:
    with served_reference() as served:
        yield served


def run(server: ReferenceServer, cases: Path, *extra: str) -> Result:
    arguments = [
        *openai_arguments(server),
        "--lane",
        LANE,
        "--cases",
        str(cases),
        "--concurrency",
        str(CONCURRENCY),
    ]
    return CliRunner().invoke(app, ["run", *arguments, *extra])


def test_a_turn_budget_voids_the_run_and_resume_finishes_it(
    server: ReferenceServer, tmp_path: Path, isolated_state: Path, history_root: Path
) -> None:
    cases = write_threads(tmp_path / "threads.jsonl", THREADS)
    stopped = run(server, cases, "--max-turns", str(MAX_TURNS))
    assert stopped.exit_code == 4, stopped.output
    sent = requests_served(server)
    assert MAX_TURNS <= sent <= MAX_TURNS + CONCURRENCY * TURNS_PER_THREAD
    sessions = sent // TURNS_PER_THREAD
    said = " ".join(stopped.output.split())
    assert "void" in said and f"--max-turns {MAX_TURNS} reached: {sent} turns sent" in said
    assert f"{sessions} of {THREADS} sessions answered, {THREADS - sessions} not started" in said
    assert "--resume" in said
    assert not (history_root / "run_manifests").exists()  # a void budget stop commits nothing

    finished = run(server, cases, "--resume")
    assert finished.exit_code == 0, finished.output
    assert requests_served(server) - sent == (THREADS - sessions) * TURNS_PER_THREAD
    assert f"resumed: {sessions} of {THREADS} sessions from the journal" in finished.output
    assert len(committed_runs(history_root)) == 1
    assert journals(isolated_state) == []


def test_resume_with_no_journal_starts_afresh_and_says_so(
    server: ReferenceServer, tmp_path: Path, history_root: Path
) -> None:
    result = run(server, write_threads(tmp_path / "threads.jsonl", 4), "--resume")
    assert result.exit_code == 0, result.output
    assert "resume: no journal of this series" in result.output and "started afresh" in result.output
    assert requests_served(server) == 4 * TURNS_PER_THREAD
    assert len(committed_runs(history_root)) == 1


def test_a_damaged_journal_entry_is_skipped_with_a_warning_and_sent_again(
    server: ReferenceServer, tmp_path: Path, isolated_state: Path
) -> None:
    cases = write_threads(tmp_path / "threads.jsonl", THREADS)
    stopped = run(server, cases, "--max-turns", str(MAX_TURNS), "--json")
    assert stopped.exit_code == 4
    (lane,) = json.loads(stopped.stdout)["lanes"]
    assert lane["void"] is True and lane["measurement"].startswith("budget reached (--max-turns")
    (journal,) = journals(isolated_state)
    kept = len(read_journal(journal).sessions)
    lines = journal.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b"thread_", b"thread-", 1)  # a hand edit: the first session's record
    journal.write_bytes(b"\n".join(lines))
    sent = requests_served(server)

    finished = run(server, cases, "--resume", "--json")
    assert finished.exit_code == 0, finished.output
    (lane,) = json.loads(finished.stdout)["lanes"]
    skipped, resumed = lane["journal"].split("\n")
    assert skipped.endswith(
        f"{journal.name}:2: skipped, its session is sent again: the checksum does not match"
    )
    assert resumed == f"resumed: {kept - 1} of {THREADS} sessions from the journal"
    assert lane["void"] is False
    assert requests_served(server) - sent == (THREADS - kept + 1) * TURNS_PER_THREAD


def test_a_journal_of_another_runtime_version_is_refused_with_the_reason(
    server: ReferenceServer, tmp_path: Path, isolated_state: Path, history_root: Path
) -> None:
    cases = write_threads(tmp_path / "threads.jsonl", THREADS)
    assert run(server, cases, "--max-turns", str(MAX_TURNS)).exit_code == 4
    (journal,) = journals(isolated_state)
    contents = read_journal(journal)
    assert contents.identity is not None
    other = replace(contents.identity, runtime_version="0" * 16)  # written against another runtime version
    lines = journal.read_bytes().split(b"\n")
    lines[0] = encode_record({"journal": 1, "identity": asdict(other)})[:-1]
    journal.write_bytes(b"\n".join(lines))
    sent = requests_served(server)

    refused = run(server, cases, "--resume")
    assert refused.exit_code == 2, refused.output
    said = " ".join(refused.output.split())
    assert "cannot resume from this journal" in said and "runtime_version '0000000000000000'" in said
    assert f"(this run: {contents.identity.runtime_version!r})" in said
    assert requests_served(server) == sent and not (history_root / "run_manifests").exists()
    assert journal.exists()


def test_a_cost_budget_for_a_target_without_a_price_is_bad_input(
    server: ReferenceServer, tmp_path: Path
) -> None:
    result = run(server, write_threads(tmp_path / "threads.jsonl", 2), "--max-cost", "1.5")
    assert result.exit_code == 2, result.output
    assert "has no price:" in " ".join(result.output.split())
    assert requests_served(server) == 0


@pytest.mark.parametrize(
    ("poison", "said"),
    [
        (lambda rows: [1, 2, 3, 4], "turn 1: a row is 1, expected an object"),
        (
            lambda rows: [{k: v for k, v in row.items() if k != "surface"} for row in rows],
            "a row has no surface",
        ),
        (lambda rows: [{**row, "turn_index": str(row["turn_index"])} for row in rows], "turn_index is '0'"),
        (lambda rows: [{**row, "prompt_tokens": 10**29} for row in rows], "prompt_tokens is 1000"),
    ],
    ids=["numbers", "no-surface", "wrong-type", "huge-tokens"],
)
def test_a_journal_record_that_checks_but_does_not_fit_is_sent_again(
    server: ReferenceServer, tmp_path: Path, isolated_state: Path, poison: Any, said: str
) -> None:
    cases = write_threads(tmp_path / "threads.jsonl", THREADS)
    assert run(server, cases, "--max-turns", str(MAX_TURNS)).exit_code == 4
    (journal,) = journals(isolated_state)
    kept = len(read_journal(journal).sessions)
    lines = journal.read_bytes().split(b"\n")
    record = json.loads(lines[1].split(b" ", 2)[2])
    lines[1] = encode_record({**record, "rows": poison(record["rows"])})[:-1]  # its checksum holds
    journal.write_bytes(b"\n".join(lines))
    sent = requests_served(server)

    finished = run(server, cases, "--resume", "--json")

    assert finished.exit_code == 0, finished.output
    (lane,) = json.loads(finished.stdout)["lanes"]
    skipped, resumed = lane["journal"].split("\n")
    assert f"{journal.name}:2: skipped, its session is sent again" in skipped and said in skipped
    assert resumed == f"resumed: {kept - 1} of {THREADS} sessions from the journal"
    assert requests_served(server) - sent == (THREADS - kept + 1) * TURNS_PER_THREAD


def test_an_empty_journal_left_by_a_kill_does_not_hide_an_older_one(
    server: ReferenceServer, tmp_path: Path, isolated_state: Path, history_root: Path
) -> None:
    cases = write_threads(tmp_path / "threads.jsonl", THREADS)
    assert run(server, cases, "--max-turns", str(MAX_TURNS)).exit_code == 4
    (journal,) = journals(isolated_state)
    kept = len(read_journal(journal).sessions)
    empty = journal.with_name("killed-as-it-began.journal")
    empty.touch()  # newer than the good journal: a run killed as it created its journal
    sent = requests_served(server)

    finished = run(server, cases, "--resume")

    assert finished.exit_code == 0, finished.output
    said = " ".join(finished.output.split())
    assert "killed-as-it-began.journal: an empty journal" in said
    assert f"resumed: {kept} of {THREADS} sessions from the journal" in said
    assert requests_served(server) - sent == (THREADS - kept) * TURNS_PER_THREAD
    assert len(committed_runs(history_root)) == 1 and journals(isolated_state) == []
