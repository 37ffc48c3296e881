"""``action.yml``: a composite action with the schema's required keys, whose steps' commands
run in bash the way a GitHub runner runs them (the step's env, ``${{ }}`` expressions
substituted, ``GITHUB_OUTPUT`` / ``GITHUB_STEP_SUMMARY`` files, ``bash -e -o pipefail``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from eval_pipeline_tests.paths import PROJECT_ROOT

ACTION = yaml.safe_load((PROJECT_ROOT / "action.yml").read_text(encoding="utf-8"))
EXPRESSION = re.compile(r"\$\{\{\s*([^}]+?)\s*\}\}")


def test_action_has_the_required_keys_and_every_run_step_names_its_shell() -> None:
    assert {"name", "description", "runs"} <= set(ACTION)
    assert ACTION["runs"]["using"] == "composite"
    for name, declared in ACTION["inputs"].items():
        assert set(declared) <= {"description", "required", "default", "deprecationMessage"}, name
        assert declared["description"]
    for declared in ACTION["outputs"].values():
        assert declared["description"] and EXPRESSION.search(declared["value"])
    for step in ACTION["runs"]["steps"]:
        assert ("run" in step) != ("uses" in step), step
        if "run" in step:
            assert step["shell"] == "bash"  # a composite action's run step must name its shell
    inputs = set(ACTION["inputs"])
    text = (PROJECT_ROOT / "action.yml").read_text(encoding="utf-8")
    used = {
        m.group(1).removeprefix("inputs.")
        for m in EXPRESSION.finditer(text)
        if m.group(1).startswith("inputs.")
    }
    assert used == inputs  # every input is used, and nothing unknown is


def run_steps(inputs: dict[str, str], workspace: Path) -> tuple[list[int], dict[str, str], str]:
    """Each ``run`` step, in order, as the runner would: (exit codes, step outputs, job summary).
    A failing step stops the job, as on a runner; ``if: always()`` steps run regardless."""
    values = {name: declared.get("default", "") for name, declared in ACTION["inputs"].items()} | inputs
    temp = workspace / "runner_temp"
    temp.mkdir()
    summary = workspace / "step_summary.md"
    summary.touch()
    outputs: dict[str, str] = {}
    codes: list[int] = []

    def substitute(text: str) -> str:
        def value(match: re.Match[str]) -> str:
            expression = match.group(1)
            if expression.startswith("inputs."):
                return values[expression.removeprefix("inputs.")]
            if expression.startswith("steps.run.outputs."):
                return outputs.get(expression.removeprefix("steps.run.outputs."), "")
            if expression == "runner.temp":
                return str(temp)
            raise AssertionError(f"unexpected expression {expression}")

        return EXPRESSION.sub(value, text)

    failed = False
    for step in ACTION["runs"]["steps"]:
        if "run" not in step or (failed and step.get("if") != "always()"):
            continue
        output_file = workspace / f"output_{len(codes)}"
        output_file.touch()
        script = workspace / f"step_{len(codes)}.sh"
        script.write_text(substitute(step["run"]), encoding="utf-8")
        env: dict[str, Any] = {
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "GITHUB_ACTION_PATH": str(PROJECT_ROOT),
            "GITHUB_OUTPUT": str(output_file),
            "GITHUB_STEP_SUMMARY": str(summary),
            "RUNNER_TEMP": str(temp),
            **{k: substitute(str(v)) for k, v in step.get("env", {}).items()},
        }
        code = subprocess.run(
            ["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", str(script)], env=env, cwd=workspace
        ).returncode
        codes.append(code)
        failed = failed or code != 0
        for line in output_file.read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition("=")
            outputs[key] = value
    return codes, outputs, summary.read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_steps_run_the_lanes_write_the_summary_and_fail_on_the_exit_code(tmp_path: Path) -> None:
    (tmp_path / "passing").mkdir()
    codes, outputs, summary = run_steps(
        {"package": "pip", "lanes": "deterministic_fluency", "split": "dev"}, tmp_path / "passing"
    )
    assert codes == [0, 0, 0] and outputs["exit-code"] == "0"
    assert (
        summary.startswith("## eval-pipeline: pass")
        and "deterministic\\_fluency/dev \\[reference\\]" in summary
    )
    junit = tmp_path / "passing" / "runner_temp" / "eval-pipeline" / "junit.xml"
    assert junit.read_text(encoding="utf-8").startswith("<?xml") and Path(outputs["summary"]).is_file()

    (tmp_path / "failing").mkdir()
    codes, outputs, summary = run_steps(
        {"package": "pip", "lanes": "refusal_calibration", "split": "dev", "runtime": "reference:no-refusal"},
        tmp_path / "failing",
    )
    assert codes == [0, 0, 1] and outputs["exit-code"] == "1"  # the job fails on the run's exit code
    assert summary.startswith("## eval-pipeline: fail") and "fabrication\\_rate" in summary
