"""Every vectorised predicate form agrees with its scalar reference, turn for turn: on every
surface of the lane-output fixtures, every surface the predicate tests spell out (the seed's
examples among them) and generated text built from the fragments the screens look for. A rate
computed as column operations agrees with the loop over rows."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_pipeline.metrics.scoring import PredicateRates, rate
from eval_pipeline.predicates.columns import VECTORISED, TurnColumns, scalar_columns, verdict_columns

TESTS = Path(__file__).resolve().parent.parent
FIXTURES = TESTS / "fixtures" / "lane_outputs"
SOURCES = [None, "", "pack", "PACK", "teaching", "vault", "session", "none", "oov", "partial"]
TAGS = [None, "", "pack-grounded", "Teaching-Grounded", "vault", "none", "session-grounded", "oov"]


def fixture_turns() -> TurnColumns:
    rows = [
        row
        for path in sorted(FIXTURES.glob("*.json"))
        for row in json.loads(path.read_text())["transcripts"]
        if row.get("error") is None
    ]
    return TurnColumns(
        [row["surface"] or "" for row in rows],
        [row.get("grounding_source") for row in rows],
        [row.get("surface_tag") for row in rows],
    )


def spelled_out_surfaces() -> list[str]:
    """Every string literal of the turn predicates' tests (seed examples, both sides of each rule)."""
    found: set[str] = set()
    for tests in (
        TESTS / "fluency" / "test_surface_predicates.py",
        TESTS / "multiturn" / "test_predicates.py",
    ):
        for node in ast.walk(ast.parse(tests.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.add(node.value)
    return sorted(found)


def with_every_label(surfaces: list[str]) -> TurnColumns:
    """Each surface under every grounding source and tag: the provenance forms read both."""
    triples = [(s, g, t) for s in surfaces for g in SOURCES for t in TAGS]
    return TurnColumns([s for s, _, _ in triples], [g for _, g, _ in triples], [t for _, _, t in triples])


def assert_agree(name: str, turns: TurnColumns) -> None:
    fast, reference = verdict_columns(name, turns), scalar_columns(name, turns)
    for index in range(len(turns)):
        assert (fast.passed[index], fast.code[index], fast.evidence[index]) == (
            reference.passed[index],
            reference.code[index],
            reference.evidence[index],
        ), (name, turns.view(index))


NAMES = VECTORISED.names()


def test_the_fluency_and_thread_forms_are_registered() -> None:
    assert {
        "no_placeholder",
        "complete_punctuation",
        "no_provenance_only",
        "no_dotted_inventory",
        "finite_predicate_shape",
    } <= set(NAMES)
    assert {"is_grounded", "length_adequate", "not_walk_fragment"} <= set(NAMES)  # the thread lane's


@pytest.mark.parametrize("name", NAMES)
def test_forms_agree_on_every_fixture_surface(name: str) -> None:
    turns = fixture_turns()
    assert len(turns) > 100  # the fixtures hold every lane's transcripts
    assert_agree(name, turns)


@pytest.mark.parametrize("name", NAMES)
def test_forms_agree_on_the_spelled_out_surfaces(name: str) -> None:
    assert_agree(name, with_every_label(spelled_out_surfaces()))


FRAGMENTS = [
    "...",
    "…",
    "..",
    "<pending>",
    "<prior>",
    "<empty>",
    "<pend",
    ";",
    "; ",
    " ; ",
    "meta.a.b",
    "x.y",
    "a_b.c_d",
    " pack-grounded (",
    "pack-grounded",
    "PACK-GROUNDED",
    "-grounded",
    "teaching-grounded",
    "vault-Grounded",
    "ſession-grounded",
    "xpack-grounded",
    "No session evidence yet.",
    "No prior turn in this session to correct yet.",
    "doubt — pack-grounded (core): ",
    " — ",
    "It is",
    "flows",
    "walked",
    "can't",
    "isn’t",
    "it's",
    "'",
    "’",
    "'quoted'",
    "rock'n'roll",  # two apostrophes in one run of letters: words cut it after the first
    "Walked",
    "runs",
    "Runs",
    "glass",
    "ed",
    "meta.is.x",
    "was.",
    ".",
    "?",
    "!",
    " ",
    "\n",
    "\t",
    "\x1c",
    "\u2028",
    "\u00a0",
    "é",
    "K",
    "word",
    "one two three four",  # the thread lane's word count and length thresholds
    "It walked far away",
    "exactly twenty chars",
]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4)), max_size=8).map("".join),
            st.sampled_from(SOURCES),
            st.sampled_from(TAGS),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_forms_agree_on_generated_turns(turns: list[tuple[str, str | None, str | None]]) -> None:
    columns = TurnColumns([s for s, _, _ in turns], [g for _, g, _ in turns], [t for _, _, t in turns])
    for name in NAMES:
        assert_agree(name, columns)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c", "d"]),
            st.sampled_from(["p", "q"]),
            st.sampled_from([True, False, None]),
        ),
        max_size=30,
    ),
    st.sampled_from([object, "boolean"]),
)
def test_a_rate_as_column_operations_equals_the_loop(
    rows: list[tuple[str, str, bool | None]], dtype: object
) -> None:
    table = pd.DataFrame(rows, columns=["case_id", "predicate", "passed"]).astype({"passed": dtype})
    rates = PredicateRates(table)
    for predicate in ("p", "q"):
        chosen = table[table["predicate"] == predicate]
        loop = rate("m", zip(chosen["case_id"].astype(str), chosen["passed"], strict=True))
        assert rates.rate("m", predicate) == loop
