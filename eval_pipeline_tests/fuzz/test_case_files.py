"""Each lane's case model under mutation: the verdict of every mutated line is the mutation's, the
problem is at its own line, and ``validate`` and ``run`` agree (in process and through the CLI)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from eval_pipeline.cases import parse_case_file
from eval_pipeline.cli import app
from eval_pipeline.cli.common import EXIT_BAD_INPUT
from eval_pipeline.lanes import LaneSpec, discover_lanes, find_lane
from eval_pipeline_tests.fuzz.harness import check_file
from eval_pipeline_tests.fuzz.mutations import (
    INVALID,
    VALID,
    base_cases,
    case_model,
    mutated_file,
    read_fixture_corpus,
    set_at,
    write_corpus,
)

CORPUS = Path(__file__).parent.parent / "fixtures" / "fuzz_corpus"
SPECS = discover_lanes()  # read once: each lookup by name reads every lane's declaration again
LANES = [spec.name for spec in SPECS]
runner = CliRunner()


@pytest.fixture(scope="module", params=LANES)
def spec(request: pytest.FixtureRequest) -> LaneSpec:
    return find_lane(request.param)


@pytest.mark.parametrize("lane", LANES)
def test_the_committed_mutation_corpus_gets_every_verdict_right(lane: str) -> None:
    spec = find_lane(lane)
    path, expected = read_fixture_corpus(CORPUS, lane)
    assert {m.kind for m in expected.values()} >= {m.__name__ for m in (*VALID, *INVALID)} - {"utf16_line"}
    counts = check_file(spec, path, expected)
    assert counts.failures() == 0, counts.examples


@pytest.mark.parametrize("lane", LANES)
def test_validate_and_run_report_the_same_lines_through_the_cli(lane: str) -> None:
    path, expected = read_fixture_corpus(CORPUS, lane)
    invalid = {n for n, m in expected.items() if not m.valid}
    where = re.compile(rf"^{re.escape(str(path))}:(\d+): ", re.MULTILINE)
    validated = runner.invoke(app, ["validate", "--lane", lane, str(path)])
    ran = runner.invoke(app, ["run", "--lane", lane, "--cases", str(path)])
    for result in (validated, ran):
        assert result.exit_code == EXIT_BAD_INPUT, result.output
        assert "Traceback" not in result.output
        assert {int(n) for n in where.findall(result.stderr)} == invalid
    assert validated.stderr.splitlines()[:-1] == ran.stderr.splitlines()[:-1]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), lines=st.integers(1, 12))
def test_mutated_files_of_every_lane(tmp_path_factory: pytest.TempPathFactory, seed: int, lines: int) -> None:
    rng = random.Random(seed)
    for spec in SPECS:
        mutated = mutated_file(base_cases(spec), case_model(spec), spec.name, rng, lines)
        path = tmp_path_factory.mktemp("fuzz") / f"{spec.name}.jsonl"
        counts = check_file(spec, path, write_corpus(path, mutated, rng))
        assert counts.failures() == 0, counts.examples


COERCIONS = {
    "conversational_thread_coherence": ("turns", 0, "expects_grounded"),
    "i18n_prompt": ("schema_version",),
}


@pytest.mark.parametrize("value", ["yes", "on", 1, "true", 1.0, "1", True])
@pytest.mark.parametrize("lane", sorted(COERCIONS))
def test_no_text_or_number_is_coerced_into_a_bool_or_an_integer(
    tmp_path: Path, lane: str, value: object
) -> None:
    spec = find_lane(lane)
    file = tmp_path / "case.jsonl"
    file.write_text(json.dumps(set_at(base_cases(spec)[0], COERCIONS[lane], value)) + "\n", encoding="utf-8")
    cases, problems = parse_case_file(file, case_model(spec))
    genuine = {"i18n_prompt": 1, "conversational_thread_coherence": True}[lane]
    if type(value) is type(genuine) and value == genuine:
        assert problems == [] and len(cases) == 1
    else:
        assert cases == [] and [(p.line, p.field) for p in problems] == [
            (1, ".".join(map(str, COERCIONS[lane])).replace(".0.", "[0]."))
        ]
