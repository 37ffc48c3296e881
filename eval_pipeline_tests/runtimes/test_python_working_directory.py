"""A ``python:`` bot beside the user's files: the working directory is not on the import path of
the ``eval-pipeline`` command, so the error says how to put it there, and that works."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EVAL_PIPELINE = str(Path(sys.executable).parent / "eval-pipeline")
BOT = 'class Bot:\n    def chat(self, prompt):\n        return "Truth is what holds up."\n'


@pytest.mark.slow
def test_a_bot_in_the_working_directory_is_found_with_the_path_the_error_names(
    tmp_path: Path, isolated_state: Path
) -> None:
    (tmp_path / "mybot.py").write_text(BOT, encoding="utf-8")
    command = [EVAL_PIPELINE, "run", "--lane", "deterministic_fluency", "--split", "dev"]
    env = {**os.environ, "COLUMNS": "200"}
    missing = subprocess.run(
        [*command, "--runtime", "python:mybot:Bot"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert missing.returncode == 2 and "Traceback" not in missing.stderr, missing.stderr
    assert "cannot import 'mybot'" in missing.stderr and """-o 'paths=["."]'""" in missing.stderr
    found = subprocess.run(
        [*command, "--runtime", "python:mybot:Bot", "-o", 'paths=["."]'],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert found.returncode in (0, 1), found.stderr[-3000:]  # it ran: its checks decided the code
    assert "deterministic_fluency [dev]" in found.stdout
