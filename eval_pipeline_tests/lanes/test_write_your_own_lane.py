"""The manual's "Write your own lane" runs as written: its four files pasted as they stand,
then its commands with the exit codes it states; and the problems it says `validate` reports."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from eval_pipeline.cases import CaseFileError
from eval_pipeline.lanes import discover_lanes
from eval_pipeline.predicates import PREDICATES
from eval_pipeline.run.pipeline import evaluate_lane
from eval_pipeline.runtimes import build_runtime
from eval_pipeline_tests.docs_pages import doc_pages, pasted_files
from eval_pipeline_tests.metric_tables import lane_values
from eval_pipeline_tests.paths import PROJECT_ROOT

PAGE = PROJECT_ROOT / "docs" / "write-a-lane.md"
LANE = "no_needless_apology"
PREDICATE_FILE = "eval_pipeline/predicates/apology.py"
STATED_EXIT = re.compile(r"#\s*exit (\d)")


def pasted() -> dict[str, str]:
    files = pasted_files(PAGE)
    assert set(files) == {
        PREDICATE_FILE,
        f"evals/{LANE}/lane.yaml",
        f"evals/{LANE}/contract.md",
        f"evals/{LANE}/dev/cases.jsonl",
    }
    return files


def test_every_page_that_says_paste_is_pasted_by_a_test() -> None:
    """Pages with paste blocks are the ones this module (or another named here) pastes."""
    pasting = {page.relative_to(PROJECT_ROOT).as_posix() for page in doc_pages() if pasted_files(page)}
    assert pasting == {"docs/write-a-lane.md"}


@pytest.fixture
def lane_folder(tmp_path: Path) -> Path:
    """The page's lane under an evals folder (and its predicate registered in this process)."""
    files = pasted()
    assert len(files[f"evals/{LANE}/lane.yaml"].splitlines()) <= 40
    if "no_apology" not in PREDICATES:
        exec(compile(files[PREDICATE_FILE], PREDICATE_FILE, "exec"), {"__name__": "apology"})
    for path, text in files.items():
        if path.startswith("evals/"):
            target = tmp_path / path.removeprefix("evals/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
    return tmp_path


def test_the_walk_through_lane_runs(lane_folder: Path) -> None:
    (spec,) = discover_lanes(lane_folder)
    run = evaluate_lane(spec, "dev", build_runtime("reference"))
    values = lane_values(run.metric_values)
    assert values == {
        "no_apology_rate": 1.0,
        "punctuation_rate": 1.0,
        "both_hold": 1.0,
        "cases": 2.0,
        "error_rate": 0.0,
    }
    # Only the plain case's probe is scored; the setup turn is sent but never judged.
    assert set(run.case_predicates["case_id"]) == {"plain_truth"}
    assert set(run.transcripts["role"]) == {"setup", "probe"}


def test_a_declaration_naming_an_unknown_predicate_is_a_lane_file_problem(lane_folder: Path) -> None:
    path = lane_folder / LANE / "lane.yaml"
    path.write_text(
        path.read_text("utf-8").replace("rate: no_apology}", "rate: no_apologee}"), encoding="utf-8"
    )
    with pytest.raises(CaseFileError) as caught:
        discover_lanes(lane_folder)
    (problem,) = caught.value.problems
    assert problem.field == "metrics.no_apology_rate" and "no_apologee" in problem.message


def test_a_missing_contract_is_a_lane_file_problem(lane_folder: Path) -> None:
    (lane_folder / LANE / "contract.md").unlink()
    with pytest.raises(CaseFileError) as caught:
        discover_lanes(lane_folder)
    (problem,) = caught.value.problems
    assert (problem.line, problem.field) == (4, "contract") and "does not exist" in problem.message


def without_metrics(text: str) -> str:
    return text[: text.index("\nmetrics:")] + "\nmetrics: {}\n"


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (
            lambda t: t.replace("prompt: {type: str, min_length: 1}", "prompt: {type: str, pattern: '([a-'}"),
            "case_schema.fields.prompt",
            "is not a regular expression",
        ),
        (
            lambda t: t.replace(
                "    prompt: {type: str", "    __class__: {type: str, default: ''}\n    prompt: {type: str"
            ),
            "case_schema.fields",
            "field name '__class__' must match",
        ),
        (without_metrics, "metrics", "should have at least 1 item"),
        (
            lambda t: t.replace(
                "  cases: {count: cases}", "  cases: {count: cases}\n  error_rate: {rate: no_apology}"
            ),
            "metrics.error_rate",
            "'error_rate' is a metric every lane emits",
        ),
        (
            lambda t: t.replace("value: 0.9", "value: 1.5"),
            "thresholds[0].value",
            "'no_apology_rate' is a rate",
        ),
        (
            lambda t: t.replace("  - role: probe", "  - role: prob"),
            "turn_predicates[0].role",
            "no turn has role 'prob'",
        ),
        (
            lambda t: t.replace("where: {kind: [plain]}", "where: {kind: [plane]}"),
            "turn_predicates[0].where.kind",
            "'plane' is not one of kind's values",
        ),
        (
            lambda t: t.replace("items: {type: str}, default: []}", "items: {type: str}, default: 'none'}"),
            "case_schema.fields.setup.default",
            "Input should be a valid list",
        ),
    ],
    ids=[
        "bad-pattern",
        "dunder-field",
        "no-metrics",
        "error-rate",
        "rate-above-1",
        "role",
        "enum",
        "default",
    ],
)
def test_a_declaration_that_cannot_work_is_one_problem_at_its_line(
    lane_folder: Path, change: Callable[[str], str], field: str, message: str
) -> None:
    path = lane_folder / LANE / "lane.yaml"
    text = change(path.read_text("utf-8"))
    assert text != path.read_text("utf-8")
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CaseFileError) as caught:
        discover_lanes(lane_folder)
    (problem,) = [p for p in caught.value.problems if p.field == field]
    assert message in problem.message, problem
    first_word = field.split(".")[-1].split("[")[0]
    assert problem.line > 0 and first_word in text.splitlines()[problem.line - 1], problem


def project_copy(root: Path) -> Path:
    """The repository as a reader has it (the package, evals/runtimes.yaml), with the page's
    files pasted in: a copy, so the predicate module is added to no package but the copy's."""
    shutil.copytree(
        PROJECT_ROOT / "eval_pipeline", root / "eval_pipeline", ignore=shutil.ignore_patterns("__pycache__")
    )
    (root / "evals").mkdir()
    shutil.copyfile(PROJECT_ROOT / "evals" / "runtimes.yaml", root / "evals" / "runtimes.yaml")
    shutil.copyfile(PROJECT_ROOT / "pyproject.toml", root / "pyproject.toml")  # the project's marker
    for path, text in pasted().items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    return root


def eval_pipeline(root: Path, state: Path, command: str) -> subprocess.CompletedProcess[str]:
    """``eval-pipeline …`` as the reader runs it, in the copy, from its root."""
    env = {
        **os.environ,
        "PYTHONPATH": str(root),
        "COLUMNS": "100",
        "EVAL_PIPELINE_STATE": str(state),
        "EVAL_PIPELINE_HISTORY": str(state / "history"),
        "DAGSTER_HOME": str(state / "dagster_home"),
    }
    env.pop("EVAL_PIPELINE_EVALS", None)
    env.pop("EVAL_PIPELINE_PROJECT", None)  # the copy is found from where the command runs
    words = command.split()
    assert words[0] == "eval-pipeline"
    return subprocess.run(
        [sys.executable, "-c", "from eval_pipeline.cli import main; main()", *words[1:]],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_the_page_pasted_as_written_runs_with_the_exit_codes_it_states(
    tmp_path: Path, isolated_state: Path
) -> None:
    root = project_copy(tmp_path / "repository")
    page = PAGE.read_text(encoding="utf-8")
    block = page[page.index("## Run it") :].split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if line.strip()]
    assert [c.split("#")[0].split()[:2] for c in commands] == [
        ["eval-pipeline", "validate"],
        ["eval-pipeline", "run"],
    ]
    for line in commands:
        command, comment = line.split("#", 1)
        stated = STATED_EXIT.search("#" + comment)
        assert stated is not None, line
        result = eval_pipeline(root, isolated_state, command.strip())
        assert result.returncode == int(stated.group(1)), result.stdout[-3000:] + result.stderr[-3000:]
    assert "no_apology_rate" in result.stdout and LANE in result.stdout

    # The problems the page says validate reports, as it words them, with exit 2 and no traceback.
    contract_problem = re.search(r"`(evals/no_needless_apology/lane\.yaml:\d+: contract: [^`]+)`", page)
    import_problem = re.search(r"`(eval_pipeline/predicates/apology\.py:\d+: \(import\): [^`]+)`", page)
    assert contract_problem is not None and import_problem is not None
    contract = root / "evals" / LANE / "contract.md"
    kept = contract.read_text(encoding="utf-8")
    contract.unlink()
    result = eval_pipeline(root, isolated_state, "eval-pipeline validate")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert any(line.endswith(contract_problem.group(1)) for line in result.stderr.splitlines()), result.stderr
    contract.write_text(kept, encoding="utf-8")

    predicate = root / PREDICATE_FILE
    predicate.write_text(
        "".join(
            line
            for line in predicate.read_text(encoding="utf-8").splitlines(keepends=True)
            if not line.startswith("from eval_pipeline.predicates import")
        ),
        encoding="utf-8",
    )
    result = eval_pipeline(root, isolated_state, "eval-pipeline validate")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert import_problem.group(1) in result.stderr.splitlines(), result.stderr
