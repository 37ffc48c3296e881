"""Every benchmark under ``benchmarks/`` runs at its tiny size, so none can rot unnoticed.

A benchmark declares its test-suite runs in a module-level constant (``benchmarks/README.md``)::

    TINY_RUNS = {"--cases 1000 --resamples 200": [r"^compare_runs, .*: +[0-9.]+ s$"]}

each key the arguments of one run (split as a shell splits them), each value the regular
expressions of the lines of figures that run promises: each must match a line of its standard
output, and each line it matches must hold a number. The constant is read from the script's
source, so collecting these tests imports none of the benchmarks. Each run is its own process, started from the project's root
as ``benchmarks/README.md`` runs them, with its own state, history and temporary folder (every
file a benchmark writes goes there); the timeout only stops a run that hangs: speed is what the
benchmarks print, never asserted here.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import os
import re
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from eval_pipeline_tests.paths import PROJECT_ROOT

BENCHMARKS = PROJECT_ROOT / "benchmarks"
DECLARATION = "TINY_RUNS"
HOW_TO_DECLARE = (
    f"give it a module-level {DECLARATION} = {{'<arguments of a run a few seconds long>': "
    "[r'<a regular expression of a line of figures it prints>', ...]}, one entry per run "
    "(see benchmarks/README.md, 'Tiny runs')"
)
HANG_S = 300  # a run that takes this long hangs (tiny runs take seconds)


@dataclass(frozen=True)
class TinyRun:
    """One test-suite run of a benchmark: its arguments and the lines of figures it promises."""

    script: Path
    args: str
    figures: tuple[str, ...]  # regular expressions, each matching a line of standard output

    @property
    def label(self) -> str:
        return f"{self.script.name} {self.args}".strip()


def benchmark_scripts(folder: Path = BENCHMARKS) -> list[Path]:
    """Every script in ``folder`` (each one a benchmark)."""
    return sorted(folder.glob("*.py"))


def declared_runs(script: Path) -> list[TinyRun]:
    """The script's :data:`DECLARATION`, checked; a ValueError says what is wrong and how to mend it."""
    name = f"{script.parent.name}/{script.name}"
    tree = ast.parse(script.read_text(encoding="utf-8"), filename=name)
    assigned = [
        node
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and any(
            isinstance(target, ast.Name) and target.id == DECLARATION
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        )
    ]
    if not assigned or assigned[-1].value is None:
        raise ValueError(f"{name} declares no {DECLARATION}: {HOW_TO_DECLARE}")
    where = f"{name}:{assigned[-1].lineno}: {DECLARATION}"
    try:
        runs = ast.literal_eval(assigned[-1].value)
    except (ValueError, TypeError, SyntaxError, RecursionError) as error:
        raise ValueError(f"{where} is not a literal ({error}): {HOW_TO_DECLARE}") from None
    if not isinstance(runs, dict) or not runs:
        raise ValueError(
            f"{where} is {type(runs).__name__} {runs!r}, expected a non-empty dict: {HOW_TO_DECLARE}"
        )
    declared = []
    for args, figures in runs.items():
        if not isinstance(args, str) or not isinstance(figures, list) or not figures:
            raise ValueError(
                f"{where}: {args!r}: {figures!r}: expected the arguments (text) → a non-empty list of "
                f"regular expressions: {HOW_TO_DECLARE}"
            )
        if not args.strip():
            raise ValueError(f"{where}: a run without arguments runs at full size: {HOW_TO_DECLARE}")
        try:
            shlex.split(args)
            for pattern in figures:
                re.compile(pattern)
        except (ValueError, TypeError, re.error) as error:
            raise ValueError(f"{where}: {args!r}: {figures!r}: {error}") from None
        declared.append(TinyRun(script, args, tuple(figures)))
    return declared


def required_modules(script: Path) -> tuple[str, ...]:
    """The modules a benchmark needs beyond the project's own dependencies (its optional
    ``REQUIRES``, a literal tuple of module names): without one, its tiny run is skipped, saying so."""
    tree = ast.parse(script.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "REQUIRES" for target in node.targets
        ):
            return tuple(ast.literal_eval(node.value))
    return ()


def declaration_problem(script: Path) -> str:
    """What is wrong with the script's declaration, in words ('' when nothing is)."""
    try:
        declared_runs(script)
    except ValueError as problem:
        return str(problem)
    return ""


def tiny_run_params() -> list[object]:
    """One parameter per declared run; a benchmark whose declaration is wrong or missing is one
    parameter too, so the runs test fails on it instead of leaving it out."""
    params: list[object] = []
    for script in benchmark_scripts():
        try:
            runs = declared_runs(script)
        except ValueError:  # the test reports it, with declared_runs' words
            params.append(pytest.param(script, None, id=script.name))
            continue
        params += [pytest.param(script, run, id=run.label) for run in runs]
    return params


def test_the_benchmarks_are_found() -> None:
    names = {script.name for script in benchmark_scripts()}
    assert {"history.py", "paired.py", "scale.py"} <= names, names


@pytest.mark.parametrize("script", benchmark_scripts(), ids=lambda script: script.name)
def test_every_benchmark_declares_its_tiny_runs(script: Path) -> None:
    if problem := declaration_problem(script):
        pytest.fail(problem, pytrace=False)


def test_a_new_benchmark_is_found_and_told_how_to_declare_its_tiny_runs(tmp_path: Path) -> None:
    (tmp_path / "undeclared.py").write_text('"""A benchmark."""\nSIZES = [1]\n', encoding="utf-8")
    (tmp_path / "listed.py").write_text('TINY_RUNS = ["--n 10"]\n', encoding="utf-8")
    (tmp_path / "one_pattern.py").write_text('TINY_RUNS = {"--n 10": "^n"}\n', encoding="utf-8")
    (tmp_path / "full_size.py").write_text('TINY_RUNS = {" ": ["^n"]}\n', encoding="utf-8")
    (tmp_path / "bad_pattern.py").write_text('TINY_RUNS = {"--n 10": ["(unclosed"]}\n', encoding="utf-8")
    (tmp_path / "declared.py").write_text(
        'import not_installed_anywhere\n\nTINY_RUNS: dict[str, list[str]] = {"--n 10": [r"^n +\\d+"]}\n',
        encoding="utf-8",
    )
    assert [s.name for s in benchmark_scripts(tmp_path)] == [
        "bad_pattern.py",
        "declared.py",
        "full_size.py",
        "listed.py",
        "one_pattern.py",
        "undeclared.py",
    ]
    folder = tmp_path.name
    with pytest.raises(ValueError, match=rf"^{folder}/undeclared\.py declares no TINY_RUNS: give it a mod"):
        declared_runs(tmp_path / "undeclared.py")
    with pytest.raises(ValueError, match=rf"^{folder}/listed\.py:1: TINY_RUNS is list .*a non-empty dict"):
        declared_runs(tmp_path / "listed.py")
    with pytest.raises(
        ValueError, match=rf"^{folder}/one_pattern\.py:1: TINY_RUNS: '--n 10': '\^n': expected the"
    ):
        declared_runs(tmp_path / "one_pattern.py")
    with pytest.raises(ValueError, match=rf"^{folder}/full_size\.py:1: TINY_RUNS: a run without arguments"):
        declared_runs(tmp_path / "full_size.py")
    with pytest.raises(ValueError, match=rf"^{folder}/bad_pattern\.py:1: TINY_RUNS: '--n 10'.*missing \)"):
        declared_runs(tmp_path / "bad_pattern.py")
    assert declared_runs(tmp_path / "declared.py") == [
        TinyRun(tmp_path / "declared.py", "--n 10", (r"^n +\d+",))
    ]


@pytest.mark.slow
@pytest.mark.parametrize(("script", "run"), tiny_run_params())
def test_every_benchmark_runs_at_its_tiny_size(script: Path, run: TinyRun | None, tmp_path: Path) -> None:
    if run is None:
        pytest.fail(declaration_problem(script) or f"{script.name}: declared since collection", pytrace=False)
    missing = [name for name in required_modules(script) if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"{script.name} needs {', '.join(missing)}, not installed here (its REQUIRES)")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    output = run_benchmark(run, scratch)
    if output.returncode != 0:
        pytest.fail(
            f"{run.label} exited {output.returncode}\n--- stdout ---\n{output.stdout[-3000:]}"
            f"\n--- stderr ---\n{output.stderr[-3000:]}",
            pytrace=False,
        )
    lines = output.stdout.splitlines()
    for pattern in run.figures:
        figures = [line for line in lines if re.search(pattern, line)]
        assert figures, f"{run.label} printed no line matching {pattern!r}:\n{output.stdout[-3000:]}"
        assert all(re.search(r"\d", line) for line in figures), (
            f"{run.label}: {pattern!r}: no figure in {figures}"
        )


def run_benchmark(run: TinyRun, scratch: Path) -> subprocess.CompletedProcess[str]:
    """The run in its own process (group), its temporary files in ``scratch``; the group is
    stopped when it hangs, and whatever it left running when it ends."""
    env = {**os.environ, "TMPDIR": str(scratch), "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    command = [sys.executable, str(run.script.relative_to(PROJECT_ROOT)), *shlex.split(run.args)]
    process = subprocess.Popen(
        command,
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        stop_group(process.pid)
        stdout, stderr = process.communicate()
        pytest.fail(
            f"{run.label} still ran after {HANG_S} s\n{stdout[-2000:]}\n{stderr[-2000:]}", pytrace=False
        )
    stop_group(process.pid)  # whatever the benchmark left running (a server it did not stop)
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def stop_group(leader: int) -> None:
    """Stop every process left in the run's process group (none, once a benchmark cleaned up)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(leader, signal.SIGKILL)
