"""The README's "Write your own lane" walk-through runs as written: its YAML and its one predicate."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from eval_pipeline.cases import CaseFileError
from eval_pipeline.lanes import discover_lanes
from eval_pipeline.pipeline import evaluate_lane
from eval_pipeline.predicates import PREDICATES
from eval_pipeline.runtimes import build_runtime
from eval_pipeline_tests.metric_tables import lane_values
from eval_pipeline_tests.paths import PROJECT_ROOT


def readme_section() -> str:
    text = (PROJECT_ROOT / "README.md").read_text("utf-8")
    start = text.index("## Write your own lane")
    return text[start : text.index("\n## ", start + 1)]


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", readme_section(), re.DOTALL)


@pytest.fixture
def lane_folder(tmp_path: Path) -> Path:
    (yaml_text,) = blocks("yaml")
    assert len(yaml_text.splitlines()) <= 40
    if "no_apology" not in PREDICATES:
        (python_text,) = blocks("python")
        namespace: dict[str, object] = {}
        exec(
            "import re\nfrom eval_pipeline.predicates import TurnView, Verdict, turn_predicate\n"
            + python_text,
            namespace,
        )
    folder = tmp_path / "no_needless_apology"
    (folder / "dev").mkdir(parents=True)
    (folder / "lane.yaml").write_text(yaml_text, encoding="utf-8")
    (folder / "contract.md").write_text("# no_needless_apology\n", encoding="utf-8")
    cases = [
        {"id": "plain_truth", "kind": "plain", "prompt": "What is truth?"},
        {"id": "plain_unknown", "kind": "plain", "prompt": "Who is Aldwyn Pellegrini-Hoff?"},
        {
            "id": "after_error",
            "kind": "after_error",
            "setup": ["What is a glimmerwort?"],
            "prompt": "What is doubt?",
        },
    ]
    (folder / "dev" / "cases.jsonl").write_text(
        "".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8"
    )
    return tmp_path


def test_the_walk_through_lane_runs(lane_folder: Path) -> None:
    (spec,) = discover_lanes(lane_folder)
    run = evaluate_lane(spec, "dev", build_runtime("reference"))
    values = lane_values(run.metric_values)
    assert values == {
        "no_apology_rate": 1.0,
        "punctuation_rate": 1.0,
        "both_hold": 1.0,
        "cases": 3.0,
        "error_rate": 0.0,
    }
    # Only the two plain cases' probes are scored; the setup turn is sent but never judged.
    assert set(run.case_predicates["case_id"]) == {"plain_truth", "plain_unknown"}
    assert set(run.transcripts["role"]) == {"setup", "probe"}


def test_a_declaration_naming_an_unknown_predicate_is_a_lane_file_problem(lane_folder: Path) -> None:
    path = lane_folder / "no_needless_apology" / "lane.yaml"
    path.write_text(
        path.read_text("utf-8").replace("rate: no_apology}", "rate: no_apologee}"), encoding="utf-8"
    )
    with pytest.raises(CaseFileError) as caught:
        discover_lanes(lane_folder)
    (problem,) = caught.value.problems
    assert problem.field == "metrics.no_apology_rate" and "no_apologee" in problem.message


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
    path = lane_folder / "no_needless_apology" / "lane.yaml"
    text = change(path.read_text("utf-8"))
    assert text != path.read_text("utf-8")
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CaseFileError) as caught:
        discover_lanes(lane_folder)
    (problem,) = [p for p in caught.value.problems if p.field == field]
    assert message in problem.message, problem
    first_word = field.split(".")[-1].split("[")[0]
    assert problem.line > 0 and first_word in text.splitlines()[problem.line - 1], problem
