"""The one YAML reader, under hostile input: bounded aliases, no python tags, bounded depth,
duplicate keys refused, problems at file:line, for lane.yaml and runtimes.yaml alike."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eval_pipeline.cases.loading import FileProblemsError
from eval_pipeline.cases.strict_yaml import MAX_DEPTH, parse_yaml
from eval_pipeline.cli import app
from eval_pipeline.runtimes.targets import TargetsFileError, load_targets
from eval_pipeline_tests.fuzz.bounded_cli import run_bounded, run_cli
from eval_pipeline_tests.paths import PROJECT_ROOT


def billion_laughs(levels: int = 9, fan_out: int = 9) -> str:
    """A document of a few hundred bytes whose aliases expand to ``fan_out ** levels`` strings."""
    lines = ['l0: &l0 "lol"']
    for level in range(1, levels + 1):
        lines.append(f"l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * fan_out) + "]")
    return "\n".join(lines) + "\n"


def problems_of(text: str) -> list[str]:
    """What the reader says of ``text``: the problem it raises, else the key problems it returns."""
    try:
        document = parse_yaml("f.yaml", text)
    except FileProblemsError as exc:
        return [str(p) for p in exc.problems]
    return [str(p) for p in document.key_problems]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a: !!python/object/apply:os.system ['true']\n", "f.yaml:1: (yaml): not valid YAML"),
        ("a: !!python/name:os.system\n", "f.yaml:1: (yaml): not valid YAML"),
        (
            "a: " + "[" * 10_000 + "]" * 10_000 + "\n",
            f"f.yaml:1: (yaml): nested deeper than {MAX_DEPTH} levels",
        ),
        ("a: &x [*x]\n", "f.yaml:1: (yaml): an alias refers to its own ancestor"),
        ("a: 1\nb: 2\na: 3\n", "f.yaml:3: a: duplicate key (first at line 1)"),
        ("a:\n  b: 1\n  b: 2\n", "f.yaml:3: a.b: duplicate key (first at line 2)"),
        ("1: one\n", "f.yaml:1: (file): keys must be text (quote a key such as 1 or yes)"),
        ("a: [1\n", "f.yaml:2: (yaml): not valid YAML"),
        ("a: 1\nb: \x00\n", "f.yaml:2: (yaml): not valid YAML: special characters are not allowed"),
        ("a: 1\n---\nb: 2\n", "f.yaml:2: (yaml): not valid YAML: expected a single document"),
        ("a: 1\nb: " + "9" * 5000 + "\n", "f.yaml:2: (yaml): an integer of 5000 characters (at most 100)"),
        ("a: [0x" + "f" * 5000 + "]\n", "f.yaml:1: (yaml): an integer of 5002 characters"),
        ("a:\n  ? " + "1" * 5000 + "\n  : x\n", "f.yaml:2: (yaml): an integer of 5000 characters"),
        ("a: " + "1:" * 3000 + "1\n", "f.yaml:1: (yaml): an integer of 6001 characters"),
        ("a: !!int '" + "9" * 5000 + "'\n", "f.yaml:1: (yaml): an integer of 5000 characters"),
    ],
)
def test_a_hostile_document_is_one_clear_problem(text: str, expected: str) -> None:
    assert any(p.startswith(expected) for p in problems_of(text)), problems_of(text)


def test_aliases_and_merges_within_the_bound_still_work() -> None:
    document = parse_yaml("f.yaml", "base: &b {x: 1}\ncopy: *b\nmerged:\n  <<: *b\n  y: 2\n")
    assert document.data == {"base": {"x": 1}, "copy": {"x": 1}, "merged": {"x": 1, "y": 2}}
    assert document.line_of(("merged", "y")) == 5


@pytest.fixture
def evals(tmp_path: Path) -> Path:
    root = tmp_path / "evals"
    shutil.copytree(PROJECT_ROOT / "evals" / "deterministic_fluency", root / "deterministic_fluency")
    shutil.copy(PROJECT_ROOT / "evals" / "runtimes.yaml", root / "runtimes.yaml")
    return root


BOMB_CHECK = """
import sys
from pathlib import Path
from eval_pipeline.cases.loading import FileProblemsError
from eval_pipeline.cli import app
from eval_pipeline.lanes.spec import load_lane_spec
from eval_pipeline.runtimes.targets import load_targets
from eval_pipeline.cases.strict_yaml import parse_yaml
for read, path in ((parse_yaml, None), (load_lane_spec, sys.argv[1]), (load_targets, sys.argv[2])):
    try:
        read("f.yaml", Path(sys.argv[3]).read_text()) if path is None else read(Path(path))
    except FileProblemsError as exc:
        print(exc.problems[0])
"""


def test_a_bomb_is_refused_by_every_reader_without_expanding_it(evals: Path, tmp_path: Path) -> None:
    """In a child process under the memory ceiling: a reader that expanded the bomb would need
    gigabytes, and must fail there, not take the machine."""
    lane = evals / "deterministic_fluency" / "lane.yaml"
    lines_before = lane.read_text(encoding="utf-8").count("\n")
    lane.write_text(lane.read_text(encoding="utf-8") + billion_laughs(), encoding="utf-8")
    targets = evals / "runtimes.yaml"
    targets.write_text(billion_laughs() + "targets: {reference: {spec: reference}}\n", encoding="utf-8")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(billion_laughs(), encoding="utf-8")
    result = run_bounded(
        [sys.executable, "-c", BOMB_CHECK, str(lane), str(targets), str(bomb)], deadline_s=60
    )
    assert result.violations(60) == [] and result.exit_code == 0, (result.exit_code, result.stderr[-2000:])
    assert result.stdout.splitlines() == [
        "f.yaml:7: (yaml): its anchors and aliases expand to more than 100000 nodes",
        f"{lane}:{lines_before + 7}: (yaml): its anchors and aliases expand to more than 100000 nodes",
        f"{targets}:7: (yaml): its anchors and aliases expand to more than 100000 nodes",
    ]


def test_a_target_declaring_a_key_twice_is_refused_at_its_line(evals: Path) -> None:
    targets = evals / "runtimes.yaml"
    targets.write_text(
        "targets:\n  staging:\n    spec: reference\n    spec: 'reference:no-gloss'\n", encoding="utf-8"
    )
    with pytest.raises(TargetsFileError) as caught:
        load_targets(targets)
    assert [str(p) for p in caught.value.problems] == [
        f"{targets}:4: targets.staging.spec: duplicate key (first at line 3)"
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"targets:\n  a: {spec: reference}\n  b: {spec: \xff}\n", ":3: (file): not UTF-8 text: byte 0xff"),
        (b"targets: !!python/object/apply:os.system ['true']\n", ":1: (yaml): not valid YAML"),
        (b"targets: " + b"[" * 10_000 + b"]" * 10_000 + b"\n", f":1: (yaml): nested deeper than {MAX_DEPTH}"),
        (billion_laughs().encode(), ":7: (yaml): its anchors and aliases expand to more than"),
    ],
)
def test_validate_and_run_exit_2_on_a_hostile_targets_file(
    evals: Path, content: bytes, expected: str
) -> None:
    targets = evals / "runtimes.yaml"
    targets.write_bytes(content)
    for command in (["validate"], ["run", "--lane", "deterministic_fluency", "--split", "dev"]):
        result = run_cli(command, deadline_s=60, env={"EVAL_PIPELINE_EVALS": str(evals)})
        assert result.violations(60) == [], (result.exit_code, result.stderr[-2000:])
        assert result.exit_code == 2 and f"{targets}{expected}" in result.stderr, result.stderr[-2000:]


@pytest.mark.parametrize("file", ["runtimes.yaml", "notify.yaml", "deterministic_fluency/lane.yaml"])
def test_a_5000_digit_integer_is_bad_input_for_validate_and_run(evals: Path, file: str) -> None:
    path = evals / file
    if file == "notify.yaml":
        path.write_text("channels: {}\nroutes: []\n", encoding="utf-8")
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join([*lines, "huge: " + "9" * 5000]) + "\n", encoding="utf-8")
    expected = f"{path}:{len(lines) + 1}: (yaml): an integer of 5000 characters (at most 100)"
    run = ["run", "--lane", "deterministic_fluency", "--split", "dev"]
    for command in (["validate"], [*run, "--notify"] if file == "notify.yaml" else run):
        result = CliRunner().invoke(app, command, env={"EVAL_PIPELINE_EVALS": str(evals)})
        assert isinstance(result.exception, SystemExit), (command, result.exception)
        assert result.exit_code == 2 and expected in result.stderr, (command, result.stderr[-2000:])


@pytest.mark.slow
def test_validate_stays_small_and_quick_on_a_lane_file_bomb(evals: Path) -> None:
    lane = evals / "deterministic_fluency" / "lane.yaml"
    lane.write_text(lane.read_text(encoding="utf-8") + billion_laughs(), encoding="utf-8")
    result = run_cli(["validate"], deadline_s=60, env={"EVAL_PIPELINE_EVALS": str(evals)})
    assert result.violations(60) == [], (result.exit_code, result.stderr[-2000:])
    assert result.exit_code == 2 and "expand to more than 100000 nodes" in result.stderr
