"""Bad input anywhere (dates, runtime specs and options, replay files, lane files) exits 2 with
``file:line: field: message`` or ``option: message``, never a traceback."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.cli.common import EXIT_BAD_INPUT
from eval_pipeline_tests.paths import PROJECT_ROOT

runner = CliRunner()
FLUENCY = ["run", "--lane", "deterministic_fluency", "--split", "dev"]


def bad_input(*args: str) -> str:
    # Wide enough that the usage panel never wraps inside a path (a long temporary folder would).
    result = runner.invoke(app, list(args), env={"COLUMNS": "1000"})
    assert result.exit_code == EXIT_BAD_INPUT, (result.exit_code, result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit)  # no traceback
    return " ".join(result.stderr.replace("│", " ").split())  # usage errors come in a wrapped panel


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--date", "2026-1-5"], "'2026-1-5' is not a date; expected YYYY-MM-DD"),
        (["--date", "2026-02-30"], "'2026-02-30' is not a calendar date"),
        (["--date", "2999-01-01"], "2999-01-01 has not happened yet"),
        (["--runtime", ""], "--runtime: expected a target name or a runtime spec, got an empty string"),
        (["-o", "junk=1"], "reference runtime options: junk: unknown option (known: pack"),
        (
            ["--runtime", "openai:http://127.0.0.1:9/v1", "-o", "model=m", "-o", "max_retries=1e9"],
            "max_retries: must be between 0 and 20",
        ),
        (
            ["--runtime", "openai:http://127.0.0.1:9/v1", "-o", "model=m", "-o", 'timeout_s="5"'],
            "timeout_s: Input should be a valid number",
        ),
        (
            ["--runtime", "openai:http://127.0.0.1:9/v1", "-o", "model=m", "-o", "max_concurrency=0"],
            "max_concurrency: must be between 1 and 1024",
        ),
        (["--concurrency", "100000"], "should be less than or equal to 1024"),
    ],
)
def test_bad_run_arguments_exit_2_with_the_option_and_what_was_expected(
    args: list[str], message: str
) -> None:
    assert message in bad_input(*FLUENCY, *args)


def test_replay_files_that_are_not_turns_exit_2_naming_file_and_row(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"PAR1 this is not parquet")
    assert f"{garbage}:0: (file): not a readable Parquet file" in bad_input(
        *FLUENCY, "--runtime", f"replay:{garbage}"
    )
    columns = tmp_path / "columns.parquet"
    pq.write_table(pa.table({"case": ["a"], "answer": ["b"]}), columns)
    assert f"{columns}:1: case_id: required field is missing" in bad_input(
        *FLUENCY, "--runtime", f"replay:{columns}"
    )
    typed = tmp_path / "typed.parquet"
    pq.write_table(pa.table({"case_id": ["a"], "turn_index": ["0"], "surface": ["x"]}), typed)
    assert f"{typed}:1: turn_index: Input should be a valid integer" in bad_input(
        *FLUENCY, "--runtime", f"replay:{typed}"
    )
    jsonl = tmp_path / "turns.jsonl"
    jsonl.write_bytes(b'{"case_id": "a", "surface": "x"}\n{"case_id": "b", "surface": "\xff"}\n')
    assert f"{jsonl}:2: (line): not UTF-8" in bad_input(*FLUENCY, "--runtime", f"replay:{jsonl}")
    assert "replay runtime options: x: unknown option" in bad_input(
        *FLUENCY, "--runtime", f"replay:{jsonl}", "-o", "x=1"
    )
    assert "(it is a folder)" in bad_input(*FLUENCY, "--runtime", f"replay:{tmp_path}")


@pytest.fixture
def evals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "evals"
    shutil.copytree(PROJECT_ROOT / "evals" / "deterministic_fluency", root / "deterministic_fluency")
    monkeypatch.setenv("EVAL_PIPELINE_EVALS", str(root))
    return root / "deterministic_fluency" / "lane.yaml"


def test_lane_file_with_invalid_utf8_names_its_line(evals: Path) -> None:
    evals.write_bytes(evals.read_bytes().replace(b"title:", b"title: \xff", 1))
    line = evals.read_bytes().split(b"title:")[0].count(b"\n") + 1
    assert f"{evals}:{line}: (file): not UTF-8 text" in bad_input("validate")


def test_lane_file_with_a_duplicate_key_names_its_line(evals: Path) -> None:
    evals.write_text(evals.read_text(encoding="utf-8") + "title: again\n", encoding="utf-8")
    lines = evals.read_text(encoding="utf-8").splitlines()
    first = next(n for n, text in enumerate(lines, 1) if text.startswith("title:"))
    assert f"{evals}:{len(lines)}: title: duplicate key (first at line {first})" in bad_input("validate")


def test_a_nan_threshold_is_rejected_at_its_line(evals: Path) -> None:
    text = evals.read_text(encoding="utf-8")
    head, sep, tail = text.partition("    value: ")
    evals.write_text(head + sep + ".nan" + tail[tail.index("\n") :], encoding="utf-8")
    line = head.count("\n") + 1
    assert f"{evals}:{line}: thresholds[0].value: Input should be a finite number" in bad_input("validate")


def test_a_split_listing_a_folder_or_leaving_the_lane_folder_is_bad_input(evals: Path) -> None:
    (evals.parent / "dev" / "nested").mkdir()
    text = evals.read_text(encoding="utf-8")
    evals.write_text(text.replace("dev/cases.jsonl", "dev/nested", 1), encoding="utf-8")
    assert "dev/nested:0: (file): is a directory, not a JSONL file" in bad_input("validate")
    assert "is a directory" in bad_input(*FLUENCY)
    evals.write_text(text.replace("dev/cases.jsonl", "../../etc/passwd", 1), encoding="utf-8")
    assert "case files are relative paths inside the lane folder" in bad_input("validate")


def test_an_empty_case_file_is_a_problem_for_validate_and_run(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"\n\n")
    problem = f"{empty}:0: (file): file holds no records (it is empty or blank)"
    assert problem in bad_input("validate", "--lane", "deterministic_fluency", str(empty))
    assert problem in bad_input("run", "--lane", "deterministic_fluency", "--cases", str(empty))


def test_problems_are_printed_as_plain_text(tmp_path: Path) -> None:
    path = tmp_path / "markup.jsonl"
    path.write_text(
        '{"id": "[bold]x[/bold] :smile:", "prompt": "p", "category": "c", "expected_predicates": []}\n'
    )
    result = runner.invoke(app, ["validate", "--lane", "deterministic_fluency", str(path)])
    assert result.exit_code == EXIT_BAD_INPUT
    assert '"[bold]x[/bold] :smile:"' in result.stderr and "😄" not in result.stderr


@pytest.mark.parametrize("contract", ["/etc/passwd", "../../../../etc/passwd", "link.md"])
def test_a_contract_outside_the_lane_folder_is_bad_input(evals: Path, contract: str) -> None:
    (evals.parent / "link.md").symlink_to("/etc/passwd")
    text = evals.read_text(encoding="utf-8")
    evals.write_text(text.replace("contract: contract.md", f"contract: {contract}", 1), encoding="utf-8")
    line = text.split("contract: contract.md")[0].count("\n") + 1
    shown = bad_input("validate")
    assert f"{evals}:{line}: contract:" in shown and ("inside the lane folder" in shown or "outside" in shown)
    assert "root:" not in shown  # the file's content is never read, let alone shown


def test_problem_wording_says_each_thing_once(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_bytes(b'{"id": "a", "schema_version": true}\n{"id": "b\x01"}\n')
    shown = bad_input("validate", "--lane", "i18n_prompt", str(path))
    assert "schema_version must be the integer 1 (got true)" in shown
    assert "(got true) (got true)" not in shown
    assert f"{path}:2: (line): not valid JSON: Invalid control character at column" in shown


def test_a_file_where_a_folder_goes_is_bad_input_before_anything_runs(tmp_path: Path) -> None:
    a_file = tmp_path / "a_file"
    a_file.write_text("not a folder\n", encoding="utf-8")
    assert "'" + str(a_file) + "' is a file; expected a folder" in bad_input("report", "--out", str(a_file))
    assert "is a file; expected a folder" in bad_input(*FLUENCY, "--history", str(a_file))
    assert a_file.read_text(encoding="utf-8") == "not a folder\n"


@pytest.mark.parametrize("command", [["validate"], FLUENCY])
def test_a_bad_worker_count_in_the_environment_is_bad_input(
    command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVAL_PIPELINE_WORKERS", "abc")
    assert "EVAL_PIPELINE_WORKERS must be a whole number of processes >= 1, got 'abc'" in bad_input(*command)


def test_bad_options_of_a_target_nobody_selected_are_reported_at_their_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "evals"
    shutil.copytree(PROJECT_ROOT / "evals" / "deterministic_fluency", root / "deterministic_fluency")
    targets = root / "runtimes.yaml"
    targets.write_text(
        "targets:\n  reference: {spec: reference}\n  staging:\n    spec: openai:http://127.0.0.1:9/v1\n"
        "    options: {model: m, max_retries: 100, timeoutt_s: 5}\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("EVAL_PIPELINE_EVALS", str(root))
    for command in (["validate"], FLUENCY):
        shown = bad_input(*command)
        assert f"{targets}:5: targets.staging.options.max_retries: must be between 0 and 20" in shown
        assert f"{targets}:5: targets.staging.options.timeoutt_s: unknown option" in shown
