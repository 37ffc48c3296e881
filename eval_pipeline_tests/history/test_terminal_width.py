"""Golden: every table a command prints reads at 100 columns. No line is longer, and no name (a
lane, metric, case, predicate or runtime) is split over lines: a cut name leaves a fragment, a
token that begins a name without being one (``articulati``, ``complete_punctuation_r…``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.cells import cell_len
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.history.views import connect
from eval_pipeline.run.pipeline import LaneRun

from .conftest import CANDIDATE_RUNS, REFERENCE_RUNS, StoredRun, record_run

WIDTH = 100
# A re-score's target name (47 characters) and a --cases run: the longest names a table holds.
RESCORE = StoredRun(
    "run-x1",
    "rescore-of-7d94146e-f0fc-43d2-8437-59fb7ce8c503",
    "2024-04-02",
    False,
    case_set="custom-0123abcd",
)
TOKEN = re.compile(r"[A-Za-z0-9_.:-]+")
# Words the commands write that begin a name: "no case flipped", and the usage line's
# "turns (0 from the cache)", "latency p50", "prompt" (turns_driven, cached_turns, …), and the
# progress line's "retried 0" (retried_turns).
WORDS = frozenset({"case", "surface", "turn", "turns", "prompt", "cache", "latency", "retried"})


@pytest.fixture
def wide_history(history_root: Path, lane_runs: dict[bool, LaneRun]) -> str:
    root = str(history_root)
    for stored in (*CANDIDATE_RUNS, *REFERENCE_RUNS, RESCORE):
        record_run(root, lane_runs[stored.glossed], stored)
    return root


def names_in(root: str) -> set[str]:
    with connect(root) as con:
        rows = con.execute(
            "SELECT lane, runtime, case_set, metric FROM metrics UNION ALL "
            "SELECT lane, runtime, case_id, predicate FROM case_predicates"
        ).fetchall()
    return {str(name) for row in rows for name in row}


def fragments(output: str, names: set[str]) -> set[str]:
    """Tokens that begin a name without being one: what a name cut at a line's end leaves."""
    tokens = {token.rstrip(".:") for line in output.splitlines() for token in TOKEN.findall(line)}
    return {t for t in tokens - names - WORDS if len(t) >= 4 and any(n.startswith(t) for n in names)}


def assert_fits(output: str, names: set[str]) -> None:
    long = [line for line in output.splitlines() if cell_len(line) > WIDTH]
    assert not long, "\n".join(long)
    assert not fragments(output, names), output


def invoke(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": str(WIDTH)})
    assert result.exit_code == 0, result.output
    return result.output


COMMANDS = [
    ("history",),
    ("history", "--lane", "deterministic_fluency", "--metric", "post_gloss_predicates_pass_rate"),
    ("history", "--metrics"),
    ("diff",),
    ("diff", "run-c1", "run-c2"),
    ("flaky",),
    ("flaky", "--all"),
    ("first-failure", "fluency_truth_001"),
    ("first-failure", "fluency_truth_001", "--predicate", "no_provenance_only", "--runtime", "candidate"),
    ("compare", "--runtime", "reference", "--runtime", "candidate"),
    ("show", "run-c2"),
    ("show", "run-c2", "--case", "fluency_truth_001"),
]


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_history_family_tables_fit_100_columns(wide_history: str, args: tuple[str, ...]) -> None:
    output = invoke(*args)
    names = names_in(wide_history)
    assert_fits(output, names)
    shown = {name for name in names if name in output}
    assert shown, output  # the command printed rows, not only a note


def test_history_compact_reads_at_100_columns(wide_history: str) -> None:
    """Each lane's compacted tables under a title naming the lane, no cell cut (before it was
    fitted, the lane and most column names were cut to fit every column in 100)."""
    output = invoke("history", "compact", "--month", "2024-04")
    assert_fits(output, names_in(wide_history))
    assert "…" not in output, output
    assert "compacted · lane deterministic_fluency" in output
    assert "uncommitted_dropped" in output and "case_predicates" in output


def test_diff_shows_both_surfaces_of_a_flipped_case_by_default(wide_history: str) -> None:
    output = invoke("diff", "run-c1", "run-c2")
    flipped = output[output.index("fluency_truth_001 · no_provenance_only · change pass→fail") :]
    surface_a = flipped[flipped.index("surface_a: ") :].split("\n", 1)[0]
    surface_b = flipped[flipped.index("surface_b: ") :].split("\n", 1)[0]
    assert surface_a.startswith("surface_a: Truth is") and surface_b.startswith(
        "surface_b: truth — pack-grounded"
    )


def test_the_checker_sees_a_split_name_and_a_long_line() -> None:
    names = {"articulation_of_status", "complete_punctuation_rate"}
    assert fragments("  articulati   public\n  on_of_stat\n", names) == {"articulati"}
    assert fragments("│ complete_punctuation_r… │ 1 │", names) == {"complete_punctuation_r…".rstrip("…")}
    assert fragments("articulation_of_status complete_punctuation_rate", names) == set()
    with pytest.raises(AssertionError):
        assert_fits("x" * (WIDTH + 1), names)


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ("--lane", "conversational_thread_coherence", "--split", "dev"),
        ("--lane", "conversational_thread_coherence", "--split", "dev", "--repeat", "5"),
        ("--lane", "deterministic_fluency", "--runtime", "reference-no-gloss", "--repeat", "5"),
    ],
    ids=" ".join,
)
def test_run_tables_fit_100_columns(history_root: Path, args: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, ["run", *args], env={"COLUMNS": str(WIDTH)})
    assert result.exit_code in (0, 1), result.output
    names = names_in(str(history_root))
    assert_fits(result.output, names)  # the tables, the progress line, the failing cases
    assert {"conversational_thread_coherence", "deterministic_fluency"} & names <= set(
        TOKEN.findall(result.output)
    )
