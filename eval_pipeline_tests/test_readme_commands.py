"""What the pages say is what happens: every command of every shell block of ``README.md``,
``benchmarks/README.md`` and each page of the manual (``docs/``, in the order of its nav) runs
here, in a scratch folder, through the command line's own entry point (in this process, as
``eval-pipeline`` would run it), and exits 0, or with the code a trailing ``# exit N`` states.

A command that cannot run in a test says so on its page, with why: a trailing
``# not run in tests: <why>``, or ``<!-- not run in tests: <why> -->`` on the line before its
block (for a whole block). The pages' placeholders (run ids such as ``1a03cf48`` and
``7be2d019``, ``RUN_A RUN_B``, the tour's red run ``a50f315c``, the ``serve-reference`` port)
are the ones of the runs made before them, and of a server the test starts. Lanes run against
a scratch ``evals/`` holding the lanes the commands name, so each ``run`` stays small.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eval_pipeline.cli import app
from eval_pipeline.history.views import connect
from eval_pipeline_tests.docs_pages import doc_pages
from eval_pipeline_tests.paths import PROJECT_ROOT
from eval_pipeline_tests.runtimes.helpers import served_reference

NOT_RUN = re.compile(r"not run in tests: (.+?)\s*(?:-->)?\s*$")
STATED_EXIT = re.compile(r"#\s*exit (\d)\b")  # the exit code a command's comment states (default 0)
SHELL_FENCE = re.compile(r"\s*```(?:bash|sh|shell|console)\s*$")
# The lanes the README's commands name, copied into the scratch evals folder (the EvalCase v1
# schema is the package's own).
LANES = ("deterministic_fluency", "refusal_calibration")
SHELL = re.compile(r"[;&|<>$`]|&&")  # a command the shell must run; the others run in-process
RUN_ID = "1a03cf48"  # the README's example run id
OTHER_RUN_ID = "7be2d019"  # … and the other run of a comparison
RED_RUN_ID = "a50f315c"  # the tour's red run: refusal_calibration against reference-no-refusal
SERVED = "http://127.0.0.1:8000/v1"  # the README's serve-reference address


@dataclass(frozen=True)
class Command:
    readme: str
    line: int
    text: str
    not_run: str  # why it is not run in tests ('' when it runs)

    @property
    def exit_code(self) -> int:
        """The exit code the page states for it (``# exit 1: …``), else 0."""
        stated = STATED_EXIT.search(self.text)
        return int(stated.group(1)) if stated else 0


def shell_commands(path: Path) -> list[Command]:
    """Every command of the file's shell blocks, continuation lines joined, comments dropped."""
    lines = path.read_text(encoding="utf-8").splitlines()
    commands: list[Command] = []
    index = 0
    while index < len(lines):
        if not SHELL_FENCE.fullmatch(lines[index]):
            index += 1
            continue
        before = lines[index - 1] if index else ""
        block_reason = m.group(1) if (m := NOT_RUN.search(before)) and "<!--" in before else ""
        index += 1
        while index < len(lines) and lines[index].strip() != "```":
            start, text = index, lines[index].strip()
            while text.endswith("\\"):
                index += 1
                text = text[:-1].rstrip() + " " + lines[index].strip()
            index += 1
            if not text or text.startswith("#"):
                continue
            marked = NOT_RUN.search(text)
            reason = block_reason or (marked.group(1) if marked else "")
            commands.append(Command(path.relative_to(PROJECT_ROOT).as_posix(), start + 1, text, reason))
        index += 1
    return commands


def all_commands() -> list[Command]:
    return [command for page in doc_pages() for command in shell_commands(page)]


def test_every_command_the_pages_do_not_run_says_why() -> None:
    commands = all_commands()
    assert len(commands) > 30  # the parser finds the README's blocks
    for command in commands:
        assert command.not_run == "" or len(command.not_run.split()) >= 3, command
    ran = [c for c in commands if not c.not_run]
    assert {c.readme for c in ran} > {"README.md", "docs/running.md", "docs/history.md"}
    # The tour's red run is run, and fails an ERROR check under a declared name.
    assert any(c.exit_code == 1 and "--runtime reference-no-refusal" in c.text for c in ran)
    assert any(c.text.startswith("eval-pipeline run") for c in ran)
    assert any(c.text.startswith("eval-pipeline compare") for c in ran)


@pytest.fixture
def scratch(tmp_path: Path, isolated_state: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A working folder with the files the README's commands name, and an evals folder of the
    lanes they name."""
    evals = tmp_path / "evals"
    for lane in LANES:
        shutil.copytree(PROJECT_ROOT / "evals" / lane, evals / lane)
    shutil.copyfile(PROJECT_ROOT / "evals" / "runtimes.yaml", evals / "runtimes.yaml")
    monkeypatch.setenv("EVAL_PIPELINE_EVALS", str(evals))
    work = tmp_path / "work"
    work.mkdir()
    fluency = PROJECT_ROOT / "evals" / "deterministic_fluency" / "public" / "v1" / "cases.jsonl"
    shutil.copyfile(fluency, work / "my_cases.jsonl")
    yield work


def recorded_turns(path: Path) -> None:
    """The reference runtime's answers to the fluency lane's public split, as a replay file."""
    from eval_pipeline.lanes import find_lane
    from eval_pipeline.run.pipeline import evaluate_lane
    from eval_pipeline.runtimes import build_runtime

    turns = evaluate_lane(
        find_lane("deterministic_fluency"), "public", build_runtime("reference")
    ).transcripts
    fields = ["case_id", "turn_index", "surface", "grounding_source"]
    path.write_text("".join(json.dumps(r) + "\n" for r in turns[fields].to_dict("records")), encoding="utf-8")


def with_placeholders(text: str, history: Path, served: str) -> str:
    """The command with the pages' placeholders replaced by this history's run ids."""
    if RED_RUN_ID in text:
        with connect(str(history)) as con:
            red = con.execute(
                "SELECT run_id FROM runs WHERE lane = 'refusal_calibration' "
                "AND runtime = 'reference-no-refusal' ORDER BY started_at DESC LIMIT 1"
            ).fetchall()
        assert red, "the tour makes its red run before it names it"
        return text.replace(RED_RUN_ID, red[0][0][:8])
    if RUN_ID not in text and OTHER_RUN_ID not in text and "RUN_A RUN_B" not in text:
        return text.replace(SERVED, served)
    with connect(str(history)) as con:
        runs = con.execute(
            "SELECT run_id FROM runs WHERE lane = 'deterministic_fluency' AND runtime = 'reference' "
            "AND split = 'public' AND case_set = 'public' ORDER BY started_at"
        ).fetchall()
    assert len(runs) >= 2, "the README runs the fluency lane twice before it names a run"
    return (
        text.replace(RUN_ID, runs[0][0][:8])
        .replace(OTHER_RUN_ID, runs[-1][0][:8])
        .replace("RUN_A RUN_B", f"{runs[-2][0]} {runs[-1][0]}")
    )


@pytest.mark.slow
def test_every_command_of_the_pages_that_can_run_here_exits_as_stated(
    scratch: Path, isolated_state: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded_turns(scratch / "turns.jsonl")
    commands = all_commands()
    env = {"COLUMNS": "100", "BROWSER": "true", "EVAL_PIPELINE_WORKERS": "1"}  # report --open: opens nothing
    monkeypatch.chdir(scratch)
    failed: list[str] = []
    with served_reference() as server:
        for command in commands:
            if command.not_run:
                continue
            text = with_placeholders(command.text, isolated_state / "history", server.base_url)
            words = shlex.split(text, comments=True)
            assert words[0] == "eval-pipeline" and not SHELL.search(" ".join(words)), command
            result = CliRunner().invoke(app, words[1:], env=env)
            if result.exit_code != command.exit_code:
                failed.append(
                    f"{command.readme}:{command.line}: {command.text}\n  exit {result.exit_code}, "
                    f"the page says {command.exit_code}\n" + result.output[-3000:]
                )
    skipped = [c for c in commands if c.not_run]
    with capsys.disabled():
        print(f"\ncommands of the pages: {len(commands) - len(skipped)} ran, {len(skipped)} not run:")
        for reason in sorted({c.not_run for c in skipped}):
            print(f"  {sum(c.not_run == reason for c in skipped)} × {reason}")
    assert not failed, "\n".join(failed)


def test_every_dagster_release_the_pages_name_is_the_one_the_project_pins() -> None:
    pinned = re.search(r'"dagster==([0-9.]+)"', (PROJECT_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pinned is not None
    dg_tools = (PROJECT_ROOT / ".ci" / "dg-tools.txt").read_text(encoding="utf-8")
    assert f"dagster-dg-cli=={pinned.group(1)}" in dg_tools
    for readme in doc_pages():
        named = set(re.findall(r"\b1\.1[0-9]\.[0-9]+\b", readme.read_text(encoding="utf-8")))
        assert named <= {pinned.group(1)}, (
            f"{readme.name} names {sorted(named)}; the project pins {pinned.group(1)}"
        )
